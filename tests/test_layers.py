"""The package layers, read from the source with ast (nothing is imported): kcore imports nothing
of pyprod; the product imports nothing of tests/; the import graph of src/ has no cycle; no
function-level import of the project's own modules hides one (the ones left import optional
dependencies or a POSIX-only module, listed here with why); kcore reads no private attribute
of the objects pyprod hands it. kcore's Cython files (.pyx, .pxd) are read too, as text: their
imports and cimports count as their module's (kcore/X.pyx and kcore/X.pxd are kcore.X)."""
import ast
import pathlib
import re

import pytest

SRC = pathlib.Path(__file__).resolve().parent.parent / "src"
OWN = ("kcore", "pyprod")
# function-level imports of our own modules, each for a reason that is not a cycle
DEFERRED = {
    ("pyprod/spark/__init__.py", "pyprod.spark.datasource"): "needs pyspark",
    ("pyprod/perf.py", "pyprod.local_broker"): "--embedded only: the broker's modules",
}


def _modules():
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC)
        parts = list(rel.with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        yield ".".join(parts), rel.as_posix(), ast.parse(path.read_text(), str(path))


MODULES = {name: (rel, tree) for name, rel, tree in _modules()}
_CY_IMPORT = re.compile(r"(?:from\s+([\w.]+)\s+c?import\b|c?import\s+([\w.]+))")


def _cython_modules():
    """{kcore.X: [(rel, imported module, line, at top level)]} for every import and cimport of
    ours in kcore's .pyx and .pxd files (a line that starts with one; a docstring's prose
    never starts with `from <name> import`)."""
    found = {}
    for path in sorted((SRC / "kcore").glob("*.p[yx][xd]")):
        name = "kcore." + path.stem
        found.setdefault(name, [])
        for i, line in enumerate(path.read_text().splitlines(), 1):
            m = _CY_IMPORT.match(line.lstrip())
            target = m and (m.group(1) or m.group(2))
            if target and target.split(".")[0] in OWN:
                found[name].append((path.relative_to(SRC).as_posix(), target, i,
                                    line == line.lstrip()))
    return found


CYTHON = _cython_modules()


def test_the_cython_files_are_read():
    """The scan sees the compiled kernels' cimports (a pattern that matched none would pass
    every rule below)."""
    assert ("kcore/batch_send.pyx", "kcore.batch_columns") in {
        (rel, t) for imports in CYTHON.values() for rel, t, _, _ in imports}


def _imports(name, tree, top_level_only):
    """(imported module, line, at top level) for every import of a module of ours."""
    package = name if MODULES[name][0].endswith("__init__.py") else name.rpartition(".")[0]
    top = set(map(id, tree.body))
    for guard in tree.body:  # imports under a module-level if (the implementation choice)
        if isinstance(guard, ast.If):
            top.update(id(n) for branch in (guard.body, guard.orelse) for n in branch)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            # "from pkg import sub" imports the submodule pkg.sub where there is one
            targets = [base + "." + a.name if base + "." + a.name in MODULES else base
                       for a in node.names]
        else:
            continue
        for target in targets:
            if target.split(".")[0] in OWN:
                at_top = id(node) in top
                if at_top or not top_level_only:
                    yield target, node.lineno, at_top


def test_kcore_imports_nothing_of_pyprod():
    found = [(rel, line, t) for name, (rel, tree) in MODULES.items() if name.startswith("kcore")
             for t, line, _ in _imports(name, tree, False) if t.startswith("pyprod")]
    found += [(rel, line, t) for imports in CYTHON.values() for rel, t, line, _ in imports
              if t.startswith("pyprod")]
    assert found == []


def test_the_product_imports_no_test_code():
    found = [(rel, node.lineno) for _, (rel, tree) in MODULES.items()
             for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))
             and any((a.name if isinstance(node, ast.Import) else node.module or "")
                     .split(".")[0] == "tests" for a in node.names)]
    assert found == []


def test_no_function_level_import_of_our_own_modules():
    found = {(rel, t) for name, (rel, tree) in MODULES.items()
             for t, _, at_top in _imports(name, tree, False) if not at_top}
    # kcore.kernels(pure=...) loads the other implementation only when a test asks for it
    found = {(rel, t) for rel, t in found if rel != "kcore/__init__.py"}
    found |= {(rel, t) for imports in CYTHON.values() for rel, t, _, at_top in imports
              if not at_top}
    assert found == set(DEFERRED)


def test_the_import_graph_has_no_cycle():
    graph = {name: {t for t, _, _ in _imports(name, tree, True) if t in MODULES and t != name}
             for name, (_, tree) in MODULES.items()}
    for name, imports in CYTHON.items():  # a compiled kernel's imports and cimports
        graph.setdefault(name, set()).update(
            t for _, t, _, at_top in imports if at_top and t != name and
            (t in MODULES or t in CYTHON))
    for t in {t for targets in graph.values() for t in targets}:
        graph.setdefault(t, set())
    # a package's __init__ is entered before its submodules: an edge from a submodule up to
    # its own package is Python's order of loading, not a cycle
    for name in graph:
        graph[name] = {t for t in graph[name] if not name.startswith(t + ".")}
    state, stack, cycles = {}, [], []

    def visit(node):
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    assert cycles == []


@pytest.mark.parametrize("obj", ["client", "metadata", "sender", "conn", "updater", "hooks",
                                 "producer"])
def test_kcore_reads_no_private_attribute_of_pyprods_objects(obj):
    pattern = re.compile(r"\b%s\._[a-z]" % obj)
    found = [(str(p.relative_to(SRC)), i + 1) for p in sorted((SRC / "kcore").rglob("*"))
             if p.suffix in (".py", ".pyx", ".pxd")
             for i, line in enumerate(p.read_text().splitlines()) if pattern.search(line)]
    assert found == []
