"""The twins' contract: each kernel's stub (kcore/<name>.pyi) against both implementations.

For every public name of a stub, the compiled module (kcore.<name>, unless
PYPROD_NO_EXTENSIONS=1) and the pure twin (kcore.pure.<name>) define it, as the same kind of
thing (class, function or constant), with the stub's signature: parameter names, kinds
(positional-only, positional or keyword, *args, keyword-only, **kwargs) and defaults where the
stub writes a literal (``= ...``: some default). A class's members are checked the same way: its
methods' signatures, its data attributes (properties, descriptors, or set on self in its source),
its special methods; its constructor when the stub declares ``__init__`` (or is a NamedTuple). A
positional-only parameter's name is not part of a contract. Each module's ``__all__`` is its
stub's public names.

A stub's Protocol classes (``class NetworkHooks(Protocol)``: what a kernel calls on an object
it is given) are for type checkers only, not public names of its contract: they are in neither
implementation nor in the stub's ``__all__`` (test_protocols_are_type_only).

Signatures come from inspect.signature where it works (the twins, Cython functions compiled
with binding). The methods of cdef classes in ``binding=False`` modules carry theirs in the first
line of ``__doc__`` (setup.py's ``embedsignature`` directive, C types included); the constructor
of a cdef class is read from its ``def __init__`` (else ``__cinit__``) in the shipped .pyx, since
Cython embeds none for ``__cinit__`` and shifts the ``*`` of an ``__init__`` by one.
"""
import ast
import importlib
import importlib.machinery
import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import kcore

PACKAGE = Path(kcore.__file__).parent
STUBS = sorted(p.stem for p in PACKAGE.glob("*.pyi") if p.stem != "__init__")
IMPLS = (["compiled"] if kcore.EXTENSIONS else []) + ["pure"]

P = inspect.Parameter
SOME_DEFAULT = "<a default>"   # the stub writes `= ...`
NOT_LITERAL = "<not a literal>"  # the implementation's default is no literal
MISSING = object()
UNCHECKED_SPECIALS = {"__init__", "__buffer__", "__release_buffer__"}  # (no __buffer__ < 3.12)


# -- the stub ------------------------------------------------------------------------------------
class Entry:
    def __init__(self, kind, params=None, value=MISSING, members=None):
        self.kind, self.params, self.value, self.members = kind, params, value, members


def _default(node):
    if isinstance(node, ast.Constant) and node.value is Ellipsis:
        return SOME_DEFAULT
    return ast.literal_eval(node)


def _stub_params(args, method):
    out = [(a.arg, P.POSITIONAL_ONLY) for a in args.posonlyargs]
    out += [(a.arg, P.POSITIONAL_OR_KEYWORD) for a in args.args]
    defaults = [P.empty] * (len(out) - len(args.defaults)) + [_default(d) for d in args.defaults]
    params = [(n, k, d) for (n, k), d in zip(out, defaults)]
    if args.vararg:
        params.append((args.vararg.arg, P.VAR_POSITIONAL, P.empty))
    params += [(a.arg, P.KEYWORD_ONLY, P.empty if d is None else _default(d))
               for a, d in zip(args.kwonlyargs, args.kw_defaults)]
    if args.kwarg:
        params.append((args.kwarg.arg, P.VAR_KEYWORD, P.empty))
    return params[1:] if method else params


def _decorators(fn):
    return {ast.unparse(d) for d in fn.decorator_list}


def _stub_class(node):
    members = {}
    namedtuple = any(ast.unparse(b).endswith("NamedTuple") for b in node.bases)
    fields = []
    for item in node.body:
        if isinstance(item, ast.FunctionDef):
            deco = _decorators(item)
            if "property" in deco:
                members[item.name] = Entry("data")
            elif item.name.startswith("__") and item.name != "__init__":
                members[item.name] = Entry("special")
            else:
                members[item.name] = Entry(
                    "method", _stub_params(item.args, method="staticmethod" not in deco))
        elif isinstance(item, ast.AnnAssign):
            name = item.target.id
            members[name] = Entry("data")
            if namedtuple:
                value = P.empty if item.value is None else _default(item.value)
                fields.append((name, P.POSITIONAL_OR_KEYWORD, value))
    if namedtuple:
        members["__init__"] = Entry("method", fields)
    return Entry("class", members=members)


def _stub_tree(kernel):
    return ast.parse((PACKAGE / (kernel + ".pyi")).read_text(), kernel + ".pyi")


def _is_protocol(node):
    return isinstance(node, ast.ClassDef) and any(
        ast.unparse(b).split("[")[0].rsplit(".", 1)[-1] == "Protocol" for b in node.bases)


def stub_protocols(kernel):
    """The names of the stub's Protocol classes (type checkers' only: no contract names)."""
    return [node.name for node in _stub_tree(kernel).body if _is_protocol(node)]


def read_stub(kernel):
    """({public name: Entry}, the stub's __all__ or None); its Protocols are left out."""
    names, declared_all = {}, None
    for node in _stub_tree(kernel).body:
        if isinstance(node, ast.Assign) and [ast.unparse(t) for t in node.targets] == ["__all__"]:
            declared_all = ast.literal_eval(node.value)
            continue
        if _is_protocol(node):
            continue
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            name = node.name
        elif isinstance(node, ast.AnnAssign):
            name = node.target.id
        elif isinstance(node, ast.Assign):
            name = node.targets[0].id
        else:
            continue
        if name.startswith("_"):
            continue
        if isinstance(node, ast.FunctionDef):
            names[name] = Entry("function", _stub_params(node.args, method=False))
        elif isinstance(node, ast.ClassDef):
            names[name] = _stub_class(node)
        else:  # a constant: `NAME: Final = 61` (its value is checked) or `NAME: int`
            value = MISSING if node.value is None else _default(node.value)
            names[name] = Entry("constant", value=MISSING if value is SOME_DEFAULT else value)
    return names, declared_all


# -- an implementation's signatures ---------------------------------------------------------
def _split(text):
    parts, depth, cur, quote = [], 0, "", None
    for ch in text:
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
            continue
        cur += ch
    return parts + ([cur.strip()] if cur.strip() else [])


def parse_c_params(text):
    """The parameters of a Cython def's argument list (C types allowed: ``int64_t n=-1``,
    ``ProducerBatch batch not None``), as [(name, kind, default)]."""
    out, kind = [], P.POSITIONAL_OR_KEYWORD
    for item in _split(text):
        if item == "/":
            out = [(n, P.POSITIONAL_ONLY, d) for n, _, d in out]
            continue
        if item == "*":
            kind = P.KEYWORD_ONLY
            continue
        decl, eq, default = item.partition("=")
        decl = re.sub(r"\s+(not|or)\s+None$", "", decl.split(":")[0].strip())
        name = re.search(r"(\w+)$", decl).group(1)
        if decl.startswith("**"):
            out.append((name, P.VAR_KEYWORD, P.empty))
        elif decl.startswith("*"):
            out.append((name, P.VAR_POSITIONAL, P.empty))
            kind = P.KEYWORD_ONLY
        else:
            try:
                value = ast.literal_eval(default.strip()) if eq else P.empty
            except (ValueError, SyntaxError):
                value = NOT_LITERAL
            out.append((name, kind, value))
    return out


def _from_signature(sig):
    def literal(v):
        if v is P.empty or v is None or isinstance(v, (bool, int, float, str, bytes)):
            return v
        if isinstance(v, tuple) and all(literal(x) is x for x in v):
            return v
        return NOT_LITERAL
    return [(p.name, p.kind, literal(p.default)) for p in sig.parameters.values()]


def _embedded(obj, name):
    """The signature Cython's embedsignature put on the first line of obj.__doc__."""
    first = (getattr(obj, "__doc__", None) or "").split("\n", 1)[0]
    m = re.match(r"(?:\w+\.)?%s\((.*)\)(?:\s*->.*)?$" % re.escape(name), first)
    return None if m is None else parse_c_params(m.group(1))


# Since 3.13 a no-argument builtin (METH_NOARGS) has the text signature "($self, /)": its C
# self, which a function or a staticmethod does not bind. It takes no parameter.
NOARGS_SIGNATURE = "($self, /)"


def routine_params(obj, name, method):
    """[(name, kind, default)] of a function, or of a method without its self."""
    if getattr(obj, "__text_signature__", None) == NOARGS_SIGNATURE:
        return []
    try:
        params = _from_signature(inspect.signature(obj))
    except (ValueError, TypeError):
        params = _embedded(obj, name)
        if params is None:
            raise AssertionError("%s has no signature: neither introspectable nor embedded in "
                                 "its __doc__ (setup.py's embedsignature)" % name) from None
    return params[1:] if method else params


def _pyx_constructor(cls):
    """The parameters of a cdef class's def __init__ (else __cinit__) in the .pyx shipped beside
    its compiled module; None if cls is no cdef class there."""
    module = sys.modules[cls.__module__]
    if not module.__file__.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES)):
        return None
    pyx = Path(module.__file__).parent / (cls.__module__.rsplit(".", 1)[1] + ".pyx")
    m = re.search(r"^cdef class %s\b[^\n]*:\n(?:(?:[ \t][^\n]*)?\n)*" % re.escape(cls.__name__),
                  pyx.read_text(), re.M)
    if m is None:
        return None
    body = m.group(0)
    for special in ("__init__", "__cinit__"):
        d = re.search(r"^    def %s\(" % special, body, re.M)
        if d:
            depth, i = 1, d.end()
            while depth:
                depth += {"(": 1, ")": -1}.get(body[i], 0)
                i += 1
            return parse_c_params(" ".join(body[d.end():i - 1].split()))[1:]
    return []  # object's


def constructor_params(cls):
    params = _pyx_constructor(cls)
    return _from_signature(inspect.signature(cls)) if params is None else params


def _self_attributes(cls):
    """Names assigned on self in the methods of cls and its kcore bases (their source)."""
    names = set()
    for klass in cls.__mro__:
        if not klass.__module__.startswith("kcore."):
            continue
        names.update(getattr(klass, "__slots__", ()))
        try:
            tree = ast.parse(inspect.getsource(klass).strip())  # dedented: a nested class
        except (OSError, TypeError, IndentationError):
            continue
        for node in ast.walk(tree):
            targets = []
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
                targets = [node.target]
            for t in targets:
                for el in (t.elts if isinstance(t, ast.Tuple) else [t]):
                    if isinstance(el, ast.Attribute) and isinstance(el.value, ast.Name) and \
                            el.value.id == "self":
                        names.add(el.attr)
    return names


def kind_of(obj):
    return "class" if isinstance(obj, type) else "function" if callable(obj) else "constant"


def _fmt(params):
    marks = {P.POSITIONAL_ONLY: "/", P.KEYWORD_ONLY: "kw:", P.VAR_POSITIONAL: "*",
             P.VAR_KEYWORD: "**"}
    return "(%s)" % ", ".join(marks.get(k, "") + n + ("" if d is P.empty else "=%r" % (d,))
                              for n, k, d in params)


def compare(where, expected, actual, problems):
    ok = len(expected) == len(actual)
    for (en, ek, ed), (an, ak, ad) in zip(expected, actual) if ok else ():
        if ek == P.POSITIONAL_ONLY:
            ok &= ak in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD)
        else:
            ok &= (en, ek) == (an, ak)
        if ed is P.empty:
            ok &= ad is P.empty
        elif ed is SOME_DEFAULT:
            ok &= ad is not P.empty
        else:
            ok &= type(ad) is type(ed) and ad == ed
    if not ok:
        problems.append("%s%s, the stub says %s" % (where, _fmt(actual), _fmt(expected)))


# -- the implementations ------------------------------------------------------------------------
def implementation(kernel, impl):
    return importlib.import_module(("kcore." if impl == "compiled" else "kcore.pure.") + kernel)


def _source_class(kernel, name, impl):
    """Where the instance attributes of a class of impl are set: its own source (the twin), or
    for the compiled build's Python classes, the kcore/_<name>.py file they are compiled from."""
    pure = getattr(implementation(kernel, "pure"), name)
    if impl == "pure" or pure.__module__.startswith("kcore._"):
        return pure
    return None  # an extension type: its attributes are descriptors on the class


CASES = [pytest.param(k, i, id="%s-%s" % (k, i)) for k in STUBS for i in IMPLS]


def test_every_kernel_has_its_stub():
    assert set(STUBS) <= set(kcore.KERNELS), set(STUBS) - set(kcore.KERNELS)
    missing = set(kcore.KERNELS) - set(STUBS)
    assert not missing, "kernels without a contract (kcore/<name>.pyi): %s" % sorted(missing)


@pytest.mark.parametrize("kernel,impl", CASES)
def test_all_is_the_stub(kernel, impl):
    names, declared = read_stub(kernel)
    if declared is not None:
        assert sorted(declared) == sorted(names), "%s.pyi: __all__ is not its public names" % kernel
    module = implementation(kernel, impl)
    assert len(set(module.__all__)) == len(module.__all__), module.__all__
    assert sorted(module.__all__) == sorted(names)


@pytest.mark.parametrize("kernel,impl", CASES)
def test_protocols_are_type_only(kernel, impl):
    module = implementation(kernel, impl)
    _, declared = read_stub(kernel)
    for name in stub_protocols(kernel):
        assert name not in (declared or ()), "%s.pyi: Protocol %s is in __all__" % (kernel, name)
        assert not hasattr(module, name), \
            "%s.%s exists: the stub declares it as a Protocol, not as a contract" % (
                module.__name__, name)


@pytest.mark.parametrize("kernel,impl", CASES)
def test_signatures_are_the_stub(kernel, impl):
    module = implementation(kernel, impl)
    stub, _ = read_stub(kernel)
    problems = []
    for name, entry in stub.items():
        obj = getattr(module, name, MISSING)
        where = "%s.%s" % (module.__name__, name)
        if obj is MISSING:
            problems.append("%s is missing" % where)
            continue
        if kind_of(obj) != entry.kind:
            problems.append("%s is a %s, the stub says a %s" % (where, kind_of(obj), entry.kind))
            continue
        if entry.kind == "function":
            compare(where, entry.params, routine_params(obj, name, method=False), problems)
        elif entry.kind == "constant":
            if entry.value is not MISSING and (type(obj), obj) != (type(entry.value),
                                                                   entry.value):
                problems.append("%s = %r, the stub says %r" % (where, obj, entry.value))
        else:
            _check_class(kernel, impl, obj, entry, where, problems)
    assert not problems, "\n".join(problems)


def _check_class(kernel, impl, cls, entry, where, problems):
    source = _source_class(kernel, cls.__name__, impl)
    assigned = None
    for name, member in entry.members.items():
        here = "%s.%s" % (where, name)
        if name == "__init__":
            compare(where, member.params, constructor_params(cls), problems)
            continue
        attr = inspect.getattr_static(cls, name, MISSING)
        if member.kind == "special":
            if name not in UNCHECKED_SPECIALS and not any(
                    name in vars(k) for k in cls.__mro__ if k is not object):
                problems.append("%s is missing" % here)
        elif member.kind == "data":
            if attr is MISSING:
                if assigned is None:
                    assigned = _self_attributes(source) if source is not None else set()
                if name not in assigned:
                    problems.append("%s is missing (no descriptor on the class, not set on "
                                    "self in its source)" % here)
            elif callable(attr):
                problems.append("%s is a method, the stub says data" % here)
        elif attr is MISSING or not callable(attr):
            problems.append("%s is %s, the stub says a method" % (
                here, "missing" if attr is MISSING else "data"))
        elif _from_builtin_base(cls, name):
            # e.g. the pure PartitionQueue's deque methods, without a signature before 3.13:
            # only positional-only parameters (unnamed) can be promised for them
            if any(kind != P.POSITIONAL_ONLY for _, kind, _ in member.params):
                problems.append("%s comes from %s (positional arguments only), the stub says %s"
                                % (here, _from_builtin_base(cls, name), _fmt(member.params)))
        else:
            method = not isinstance(attr, (staticmethod, classmethod))
            compare(here, member.params, routine_params(getattr(cls, name), name, method),
                    problems)


def _from_builtin_base(cls, name):
    """The builtin base class (a C type outside kcore) cls inherits the method from, if any."""
    for klass in cls.__mro__:
        if name in vars(klass):
            if not klass.__module__.startswith("kcore."):
                try:
                    inspect.signature(vars(klass)[name])
                except (ValueError, TypeError):
                    return "%s.%s" % (klass.__module__, klass.__qualname__)
            return None
    return None


@pytest.mark.skipif(not kcore.EXTENSIONS, reason="one implementation only")
@pytest.mark.parametrize("kernel", STUBS)
def test_the_twins_constants_are_equal(kernel):
    stub, _ = read_stub(kernel)
    compiled, pure = implementation(kernel, "compiled"), implementation(kernel, "pure")
    for name, entry in stub.items():
        if entry.kind == "constant":
            assert getattr(compiled, name) == getattr(pure, name), name


# -- kcore itself ---------------------------------------------------------------------------------
def _active(kernel):
    return implementation(kernel, "compiled" if kcore.EXTENSIONS else "pure")


def test_kcore_exports_every_name_of_the_active_implementation():
    expected = set()
    for kernel in kcore.KERNELS:
        module = _active(kernel)
        expected.update(module.__all__)
        for name in module.__all__:
            assert getattr(kcore, name) is getattr(module, name), (kernel, name)
    assert len(set(kcore.__all__)) == len(kcore.__all__)
    assert set(kcore.__all__) == expected


@pytest.mark.parametrize("pure", [True, False] if kcore.EXTENSIONS else [True])
def test_kernels_is_one_implementation(pure):
    k = kcore.kernels(pure=pure)
    assert k.pure is pure
    assert set(vars(k)) == set(kcore.__all__) | {"pure"}
    for kernel in kcore.KERNELS:
        module = implementation(kernel, "pure" if pure else "compiled")
        for name in module.__all__:
            assert getattr(k, name) is getattr(module, name), (kernel, name)


@pytest.mark.skipif(not kcore.EXTENSIONS, reason="compiled kernels only")
def test_a_missing_extension_is_an_import_error():
    code = ("import sys\n"
            "sys.modules['kcore.crc'] = None  # the extension is not there\n"
            "try:\n"
            "    import kcore\n"
            "except ImportError as e:\n"
            "    print('ImportError:', e)\n"
            "else:\n"
            "    print('imported, with', kcore.crc32c)\n")
    env = dict(os.environ)
    env.pop("PYPROD_NO_EXTENSIONS", None)
    env["PYTHONPATH"] = os.pathsep.join([str(PACKAGE.parent)] + sys.path)
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.stdout.startswith("ImportError: import of kcore.crc halted"), \
        proc.stdout + proc.stderr[-2000:]
