"""Packaging, the fast part (scripts/wheels.sh builds and tests the real wheels): the metadata,
cibuildwheel's test-requires against what tests/kernels imports, the pure build's marker, the
sdist's files, and the one-line errors of a build without a compiler or without Cython."""
import ast
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile

import pytest

tomllib = pytest.importorskip("tomllib")  # 3.11+
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
with open(os.path.join(ROOT, "pyproject.toml"), "rb") as _f:
    PYPROJECT = tomllib.load(_f)
PROJECT = PYPROJECT["project"]
CIBW = PYPROJECT["tool"]["cibuildwheel"]


def test_license_and_classifiers():
    assert PROJECT["license"] == "Apache-2.0"
    with open(os.path.join(ROOT, "LICENSE")) as f:
        text = f.read()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text
    classifiers = PROJECT["classifiers"]
    assert "Typing :: Typed" in classifiers
    for pkg in ("kcore", "pyprod"):
        assert os.path.exists(os.path.join(ROOT, "src", pkg, "py.typed"))
    low = tuple(int(x) for x in PROJECT["requires-python"].lstrip(">=").split("."))
    versions = [tuple(int(x) for x in c.rsplit(" ", 1)[1].split("."))
                for c in classifiers if c.startswith("Programming Language :: Python :: 3.")]
    assert min(versions) == low and versions == sorted(versions)


def test_long_description_is_short():
    readme = PROJECT["readme"]
    assert readme["content-type"] == "text/markdown"
    assert len(readme["text"]) < 1500
    assert "PYPROD_NO_EXTENSIONS=1" in readme["text"]


def _third_party_imports(folder, top_level_only=False):
    names, local = set(), set()
    for dirpath, _, files in os.walk(folder):
        for name in files:
            if not name.endswith(".py"):
                continue
            local.add(name[:-3])
            with open(os.path.join(dirpath, name)) as f:
                tree = ast.parse(f.read())
            for node in (tree.body if top_level_only else ast.walk(tree)):
                if isinstance(node, ast.Import):
                    names.update(a.name.split(".")[0] for a in node.names)
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    names.add(node.module.split(".")[0])
                elif (isinstance(node, ast.Call) and getattr(node.func, "attr", "")
                      == "importorskip" and isinstance(node.args[0], ast.Constant)):
                    names.add(node.args[0].value.split(".")[0])
    return names - set(sys.stdlib_module_names) - local - {"kcore", "pyprod", "tests"}


# import name -> distribution; cramjam is a dependency of pyprod itself
DISTRIBUTION = {"kafka": "kafka-python", "pytest": "pytest", "crc32c": "crc32c", "lz4": "lz4",
                "pyarrow": "pyarrow", "numpy": "numpy", "pandas": "pandas", "Cython": "Cython",
                "setuptools": "setuptools"}


def test_cibuildwheel_test_requires_cover_the_kernel_tests():
    """cibuildwheel installs test-requires and runs test-command: the kernel tests and what
    conftest (tests.harness.fixtures) imports must find every third-party module there."""
    assert "tests/kernels" in CIBW["test-command"]
    # every import of the kernel tests; the harness's at module level (the rest is imported
    # inside the fixtures that need it); cramjam is pyprod's own dependency
    used = (_third_party_imports(os.path.join(ROOT, "tests", "kernels"))
            | _third_party_imports(os.path.join(ROOT, "tests", "harness"), top_level_only=True)
            | _third_party_imports(os.path.join(ROOT, "tests", "conftest.py"), top_level_only=True)
            ) - {"cramjam"}
    missing = sorted(n for n in used if DISTRIBUTION.get(n) not in CIBW["test-requires"])
    assert not missing, f"imported by tests/kernels or tests/harness, not in test-requires: {missing}"
    # kafka-python reads snappy and zstd batches back only with these (test_batch_split)
    assert {"python-snappy", "zstandard"} <= set(CIBW["test-requires"])


def test_free_threaded_builds_stay_enabled():
    assert "cpython-freethreading" in CIBW["enable"]
    assert "t-" not in CIBW.get("skip", "") and "cp3??t" not in CIBW.get("skip", "")


def test_free_threaded_test_requires_leave_out_only_the_codecs_without_such_wheels():
    """lz4 and zstandard have no cp3??t wheels: the free-threaded builds' override drops just
    those (tests/kernels/conftest.py stands cramjam in; test_lz4_frame skips)."""
    (ft,) = [o for o in CIBW.get("overrides", []) if o["select"] == "cp3??t-*"]
    assert set(CIBW["test-requires"]) - set(ft["test-requires"]) == {"lz4", "zstandard"}
    assert set(ft["test-requires"]) <= set(CIBW["test-requires"])


def _copy_tree(tmp_path):
    """setup.py, pyproject.toml, MANIFEST.in, LICENSE and src/ (with any .c already generated,
    so that cythonize has nothing to do) in tmp_path: builds here leave the checkout alone."""
    tmp_path.mkdir()
    for name in ("setup.py", "pyproject.toml", "MANIFEST.in", "LICENSE"):
        shutil.copy2(os.path.join(ROOT, name), tmp_path / name)
    shutil.copytree(os.path.join(ROOT, "src"), tmp_path / "src",
                    ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.pyd", "*.egg-info"))
    return tmp_path


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in ("PYPROD_NO_EXTENSIONS", "KCORE_ONLY")}
    env.update(extra)
    return env


def test_a_pure_wheel_knows_it_is_pure(tmp_path):
    """PYPROD_NO_EXTENSIONS=1 at build time gives a py3-none-any wheel with the marker
    kcore/_pure; installed, it imports its twins without the variable."""
    tree = _copy_tree(tmp_path / "tree")
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                    "--no-build-isolation", "-w", str(dist), str(tree)],
                   check=True, env=_env(PYPROD_NO_EXTENSIONS="1"), cwd=tmp_path)
    (whl,) = os.listdir(dist)
    assert whl.endswith("-py3-none-any.whl")
    with zipfile.ZipFile(dist / whl) as z:
        names = z.namelist()
        z.extractall(tmp_path / "site")
    assert "kcore/_pure" in names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert not [n for n in names if n.endswith((".so", ".pyd", ".c"))]
    code = ("import kcore; print(kcore.PURE_BUILD, kcore.EXTENSIONS, kcore.IMPLEMENTATION);"
            "print(kcore.crc32c(b'123456789'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env=_env(PYTHONPATH=str(tmp_path / "site")), cwd=tmp_path).stdout
    assert out.split("\n")[:2] == ["True False pure (pure build)", str(0xE3069283)]


def test_the_source_tree_is_not_a_pure_build():
    import kcore
    assert not kcore.PURE_BUILD
    assert not os.path.exists(os.path.join(ROOT, "src", "kcore", "_pure"))
    assert kcore.IMPLEMENTATION == ("compiled" if kcore.EXTENSIONS
                                    else "pure (PYPROD_NO_EXTENSIONS=1)")


def test_sdist_files(tmp_path):
    """The sdist has the LICENSE and the Cython sources, and no generated .c."""
    tree = _copy_tree(tmp_path / "tree")
    subprocess.run([sys.executable, "setup.py", "-q", "sdist", "-d", str(tmp_path / "dist")],
                   check=True, env=_env(), cwd=tree, capture_output=True)
    (sdist,) = os.listdir(tmp_path / "dist")
    import tarfile
    with tarfile.open(tmp_path / "dist" / sdist) as t:
        names = {n.split("/", 1)[1] for n in t.getnames() if "/" in n}
    assert {"LICENSE", "setup.py", "pyproject.toml", "src/kcore/varint.pyx",
            "src/kcore/varint.pxd", "src/kcore/sync_impl.h", "src/kcore/pure/varint.py"} <= names
    assert not [n for n in names if n.endswith((".c", ".so"))]


def _build_ext_error(tmp_path, code_prefix="", **env):
    tree = _copy_tree(tmp_path / "tree")
    code = code_prefix + ("import sys; sys.argv = ['setup.py', '-q', 'build_ext', '-b', 'out', "
                          "'-t', 'tmp']; exec(open('setup.py').read())")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=_env(KCORE_ONLY="varint", **env), cwd=tree)
    assert proc.returncode != 0
    return proc.stderr.strip().splitlines()[-1]


@pytest.mark.skipif(sysconfig.get_platform().startswith("win"), reason="unix compilers")
def test_no_compiler_is_one_clear_line(tmp_path):
    line = _build_ext_error(tmp_path, CC="/nonexistent/cc")
    assert line == ("error: pyprod: building kcore needs a C compiler (/nonexistent/cc not "
                    "found): install one, or PYPROD_NO_EXTENSIONS=1 for the pure-Python build "
                    "(slower, no compiler needed)")


def test_no_cython_is_one_clear_line(tmp_path):
    line = _build_ext_error(tmp_path, "import sys; sys.modules['Cython'] = None; ")
    assert line.startswith("error: pyprod: building kcore needs Cython>=3.1")
    assert "PYPROD_NO_EXTENSIONS=1" in line
