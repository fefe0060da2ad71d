"""pyprod.aio uses pyprod.KafkaProducer (and the objects it hands out) through named hooks
(topic_partitions, wakeup, transaction_manager, buffer_pool), never a private attribute: read
from the source with ast, an underscore attribute is read only of self / cls or when a class of
the same module defines it (a module's own classes work together)."""
import ast
import pathlib

AIO = pathlib.Path(__file__).resolve().parents[2] / "src" / "pyprod" / "aio"
ALLOWED = {"sys._getframe": "asyncio's own way to keep a debug-mode source traceback"}


def _private(name):
    return name.startswith("_") and not name.endswith("__")


def _defined_here(tree):
    """The underscore names a class of this module defines: methods, class attributes, slots
    and what its methods assign to self."""
    names = set()
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        for node in ast.walk(cls):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                names.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                names.add(node.value)  # __slots__
    return {n for n in names if _private(n)}


def test_aio_reads_no_private_attribute_of_another_layer():
    found = []
    for path in sorted(AIO.glob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        own = _defined_here(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "getattr":
                name = node.args[1]  # getattr(obj, "_name", ...) counts too
                if isinstance(name, ast.Constant) and _private(str(name.value)):
                    found.append((path.name, node.lineno, ast.unparse(node)))
            if not (isinstance(node, ast.Attribute) and _private(node.attr)):
                continue
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                continue
            text = ast.unparse(node)
            if node.attr not in own and text not in ALLOWED:
                found.append((path.name, node.lineno, text))
    assert found == []
