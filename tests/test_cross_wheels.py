"""scripts/cross_wheels.sh refuses what a macOS or Windows machine would refuse at import: a
module with an undefined symbol that the platform's CPython does not export; and it passes a
real kcore module (crc) there, its platform branch checked. One module per run (KCORE_ONLY),
zig and the CPython jars cached in .cache/cross after the first run."""
import os
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "scripts", "cross_wheels.sh")
BAD = '''
cdef extern from *:
    """
    int PyKcore_NoSuchFunction(void);
    """
    int PyKcore_NoSuchFunction()


def call():
    return PyKcore_NoSuchFunction()
'''
# what each target says of the symbol: the script's own check (macOS), the linker's (Windows)
REFUSED = {"x86_64-macos": "undefined symbols that neither libpython3.11.dylib nor libSystem "
                           "exports: _PyKcore_NoSuchFunction",
           "x86_64-windows": "undefined symbol: PyKcore_NoSuchFunction"}


def cross(tmp_path, target, only, *extra):
    env = dict(os.environ, KCORE_ONLY=only)
    return subprocess.run(["bash", SCRIPT, "--python", "3.11", "--target", target,
                           "--out", str(tmp_path / "out"), *extra],
                          env=env, capture_output=True, text=True)


@pytest.mark.parametrize("target", sorted(REFUSED))
def test_an_unknown_undefined_symbol_fails_the_build(tmp_path, target):
    pyx = tmp_path / "kcore_bad.pyx"
    pyx.write_text(BAD)
    p = cross(tmp_path, target, "kcore_bad", "--extra-pyx", str(pyx))
    assert p.returncode == 1, p.stdout + p.stderr
    assert "cross: FAILED" in p.stderr and REFUSED[target] in p.stderr, p.stderr


PASSED = {"x86_64-macos": "crc32c_impl.h (1 modules): @crc32q @cpuid",
          "aarch64-macos": "crc32c_impl.h (1 modules): @crc32cx @crc32cb",
          "x86_64-windows": "crc32c_impl.h (1 modules): @crc32q @cpuid"}


def test_a_kcore_module_passes_on_every_target(tmp_path):
    p = cross(tmp_path, "x86_64-macos", "crc", "--target", "aarch64-macos",
              "--target", "x86_64-windows")
    assert p.returncode == 0, p.stdout + p.stderr
    for target, proof in PASSED.items():
        assert "%s cp311: 1 modules compiled (0 compiler warnings" % target in p.stdout, p.stdout
        assert "%s: %s" % (target, proof) in p.stdout, p.stdout
    assert "crc32c_impl.h's _MSC_VER branches compiled" in p.stdout, p.stdout
