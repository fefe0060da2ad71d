"""Cross-builds kcore for macOS (x86_64, arm64) and Windows (x86_64) on Linux: run by
scripts/cross_wheels.sh, which makes the tools venv (zig, Cython, setuptools) this runs in.

Per target: Cython's .c (one generation for all, from a copy of src/kcore), setup.py's module
list and per-platform options (read with sys.platform set to the target's), compiled by zig cc
against that CPython's own headers (Maven Central's org.bytedeco:cpython jars), linked as
setuptools does it there, then checked:
  macOS:   -undefined dynamic_lookup, then every undefined symbol must be exported by that
           CPython's libpython3.X.dylib or by libSystem (zig's libSystem.tbd); where the dylib is
           of the target's arch, one more link against it without dynamic_lookup;
  Windows: linked against python3XX.lib (a link = no undefined symbol); the DLLs it imports
           must be python3XX.dll, the system's and the UCRT's; PyInit_<name> exported;
  both:    each *_impl.h's platform branch is in the modules that include it (BRANCHES).
Prints one line per target; exits 1 on the first failure, with the reason."""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CACHE = os.path.join(ROOT, ".cache", "cross")
# org.bytedeco:cpython versions on Maven Central, by CPython minor version
JARS = {"3.10": "3.10.8-1.5.8", "3.11": "3.11.3-1.5.9", "3.12": "3.12.1-1.5.10",
        "3.13": "3.13.5-1.5.12", "3.14": "3.14.3-1.5.13"}
# name: (zig target, jar classifier, its fallback, sys.platform, wheel platform tag)
TARGETS = {
    "x86_64-macos": ("x86_64-macos.10.13", "macosx-x86_64", None, "darwin", "macosx_10_13_x86_64"),
    "aarch64-macos": ("aarch64-macos.11.0", "macosx-arm64", "macosx-x86_64", "darwin",
                      "macosx_11_0_arm64"),
    "x86_64-windows": ("x86_64-windows-gnu", "windows-x86_64", None, "win32", "win_amd64"),
}
# python.org's CFLAGS that change code generation (sysconfig's CFLAGS there), then setup.py's
BASE_CFLAGS = ["-DNDEBUG", "-fwrapv", "-fno-strict-overflow"]
# What each header's platform branch leaves in the modules that include it: symbols they
# must import (or, "!name", must not), and instructions ("@mnemonic") they must contain.
BRANCHES = {
    "selector_impl.h": {"macos": ["poll", "writev", "recv"],
                        "windows": ["WSAPoll", "WSASend", "WSAGetLastError", "recv", "!poll"]},
    "sync_impl.h": {"macos": ["pthread_cond_timedwait_relative_np", "clock_gettime",
                              "pthread_mutex_lock", "!pthread_condattr_setclock"],
                    "windows": ["AcquireSRWLockExclusive", "SleepConditionVariableSRW",
                                "QueryPerformanceCounter", "!pthread_mutex_lock"]},
    "clock_impl.h": {"macos": ["clock_gettime", "pthread_once", "pthread_atfork"],
                     "windows": ["GetSystemTimePreciseAsFileTime", "!pthread_atfork"]},
    "region_impl.h": {"macos": ["mmap", "munmap"], "windows": ["!mmap", "malloc"]},
    "fork_impl.h": {"macos": ["pthread_atfork"], "windows": ["!pthread_atfork"]},
    "crc32c_impl.h": {"x86_64": ["@crc32q", "@cpuid"], "aarch64": ["@crc32cx", "@crc32cb"]},
}
# DLLs a Windows module may import: its CPython's, the system's, the UCRT's
WIN_DLLS = re.compile(r"(python3\d+|kernel32|ws2_32|api-ms-win-crt-[a-z]+-l1-1-0)\.dll$", re.I)


def say(*a):
    print("cross:", *a, flush=True)


def fail(msg):
    sys.exit("cross: FAILED: " + msg)


def run(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if p.returncode:
        fail("%s\n%s%s" % (" ".join(cmd), p.stdout[-3000:], p.stderr[-3000:]))
    return p


def cpython(ver, cls):
    """The jar's include/, libs/, dylib and dll under .cache/cross, or None if Maven Central has
    no such jar."""
    out = os.path.join(CACHE, "cpython-" + ver, cls)
    if not os.path.isdir(out):
        art = "org.bytedeco:cpython:%s:jar:%s" % (JARS[ver], cls)
        jar = os.path.join(os.path.expanduser("~/.m2/repository/org/bytedeco/cpython"), JARS[ver],
                           "cpython-%s-%s.jar" % (JARS[ver], cls))
        if not os.path.exists(jar):
            p = subprocess.run(["mvn", "-q", "dependency:get", "-Dtransitive=false",
                                "-Dartifact=" + art], capture_output=True, text=True)
            if p.returncode:
                return None
        pre = "org/bytedeco/cpython/%s/" % cls
        keep = re.compile(re.escape(pre) + r"(include/.*|libs/.*|[^/]*\.(dylib|dll))$")
        with zipfile.ZipFile(jar) as z:
            for n in z.namelist():
                if keep.match(n) and not n.endswith("/"):
                    dest = os.path.join(out + ".part", n[len(pre):])
                    os.makedirs(os.path.dirname(dest), exist_ok=True)
                    with open(dest, "wb") as f:
                        f.write(z.read(n))
        os.rename(out + ".part", out)
    return out


def sources(out, extra):
    """A fresh copy of setup.py and src/kcore (without build products) to cythonize in."""
    src = os.path.join(out, "src")
    shutil.rmtree(src, ignore_errors=True)
    shutil.copytree(os.path.join(ROOT, "src", "kcore"), os.path.join(src, "src", "kcore"),
                    ignore=shutil.ignore_patterns("*.so", "*.pyd", "*.c", "__pycache__", "pure"))
    shutil.copy(os.path.join(ROOT, "setup.py"), src)
    for path in extra:  # test hook: a module of one's own, as src/kcore/<name>.pyx
        shutil.copy(path, os.path.join(src, "src", "kcore"))
    return src


CAPTURE = """
import json, sys, sysconfig, setuptools
got = {}
setuptools.setup = lambda **kw: got.update(kw)
sysconfig.get_config_vars()  # read before the platform is faked
sys.platform = sys.argv[1]
exec(compile(open("setup.py").read(), "setup.py", "exec"), {"__name__": "__main__"})
for e in got["ext_modules"]:
    print("EXT " + json.dumps(dict(name=e.name, sources=e.sources, inc=e.include_dirs,
          macros=e.define_macros, args=e.extra_compile_args, libs=e.libraries)))
"""


def extensions(src, plat):
    """setup.py's Extension list as sys.platform == plat sees it (cythonizes on first use)."""
    p = run([sys.executable, "-c", CAPTURE, plat], cwd=src)
    return [json.loads(line[4:]) for line in p.stdout.splitlines() if line.startswith("EXT ")]


def headers(c_file):
    return set(re.findall(r'^#include "([a-z0-9_]+_impl\.h)"', open(c_file).read(), re.M))


def nm(*args):
    return run(["llvm-nm", *args]).stdout.split()


def c_name(sym):
    return sym[1:] if sym.startswith("_") else sym  # Mach-O adds a leading underscore


def libsystem_exports(zig):
    """Every name in zig's libSystem.tbd (Mach-O spelling), a few that are not symbols too."""
    tbd = open(os.path.join(os.path.dirname(zig), "lib", "libc", "darwin", "libSystem.tbd")).read()
    return set(re.findall(r"[\w$.]+", tbd.split("exports:", 1)[1]))


def macos_check(mod, pyexports, sysexports):
    """The undefined symbols of a macOS module (C names), and those that neither libpython
    nor libSystem exports."""
    undef = set(nm("-uj", mod))
    return {c_name(s) for s in undef}, sorted(undef - pyexports - sysexports)


def windows_imports(mod):
    """{dll: [symbols]} of a PE module, and its exports."""
    out = run(["llvm-objdump", "-p", mod]).stdout
    dlls, cur = {}, None
    exports = re.findall(r"^\s+\d+\s+(?:0x)?[0-9a-f]+\s+(\w+)$", out, re.M)
    for line in out.splitlines():
        m = re.match(r"\s*DLL Name: (\S+)", line)
        if m:
            cur = dlls.setdefault(m.group(1), [])
        elif cur is not None and re.match(r"\s+\d+\s+\w+$", line):
            cur.append(line.split()[-1])
        elif not line.strip():
            cur = None
    return dlls, exports


def instructions(mod, arch):
    mattr = ["--mattr=+crc"] if arch == "aarch64" else []
    return set(re.findall(r"\t([a-z0-9.]+)\s", run(["llvm-objdump", "-d", *mattr, mod]).stdout))


def check_branches(target, mods):
    """mods: [(module, headers it includes, symbols it imports, path)]. Returns proof lines."""
    os_name, arch = ("windows" if "windows" in target else "macos"), target.split("-")[0]
    lines = []
    for h, want in sorted(BRANCHES.items()):
        users = [m for m in mods if h in m[1]]
        if not users and os.environ.get("KCORE_ONLY"):  # a subset (setup.py's dev option)
            continue
        if not users:
            fail("%s: no module includes %s" % (target, h))
        have = set().union(*(m[2] for m in users))
        need = want.get(os_name, []) + want.get(arch, [])
        if any(n.startswith("@") for n in need):
            have |= {"@" + i for m in users for i in instructions(m[3], arch)}
        bad = [n for n in need if (n[1:] in have if n[0] == "!" else n not in have)]
        if bad:
            fail("%s: %s's %s branch: %s" % (target, h, os_name, ", ".join(bad)))
        lines.append("%s (%d modules): %s" % (h, len(users), " ".join(need)))
    return lines


def build(target, ver, src, zig, out, jobs):
    ztarget, cls, fallback, plat, tag = TARGETS[target]
    py = cpython(ver, cls)
    note = ""
    if py is None and fallback:
        py, note = cpython(ver, fallback), " (no %s jar for %s: %s's headers and exports)" % (
            cls, ver, fallback)
    if py is None:
        fail("no org.bytedeco:cpython %s jar for %s" % (cls, ver))
    nodot = ver.replace(".", "")
    win = plat == "win32"
    inc = os.path.join(py, "include") if win else os.path.join(py, "include", "python" + ver)
    suffix = ".cp%s-win_amd64.pyd" % nodot if win else ".cpython-%s-darwin.so" % nodot
    cc = [zig, "cc", "-target", ztarget]
    dest = os.path.join(out, target)
    shutil.rmtree(dest, ignore_errors=True)
    os.makedirs(dest)
    exts = extensions(src, plat)
    compiles = []
    for e in exts:
        obj = os.path.join(dest, e["name"] + ".o")
        args = ["-O2" if a == "/O2" else a for a in e["args"]]  # MSVC's /O2 for clang
        # MS_WIN64 as pyconfig.h defines it for MSVC (and for MinGW from 3.12 on)
        cmd = cc + BASE_CFLAGS + (["-DMS_WIN64="] if win else []) + args + \
            ["-D%s=%s" % (k, v) for k, v in e["macros"]] + ["-I" + os.path.join(src, i)
                                                          for i in e["inc"]] + \
            ["-I" + inc, "-c", os.path.join(src, e["sources"][0]), "-o", obj]
        compiles.append((e, obj, cmd))
    warnings = parallel([c[2] for c in compiles], jobs, os.path.join(dest, "compile.log"))
    link = (windows_linker(py, nodot, cc, target) if win
            else macos_linker(py, ver, cls, cc, zig, target))
    mods, nundef = [], 0
    for e, obj, _ in compiles:
        short = e["name"].split(".")[-1]
        mod = os.path.join(dest, short + suffix)
        imported = link(e, obj, mod, short)
        nundef += len(imported)
        mods.append((short, headers(os.path.join(src, e["sources"][0])), imported, mod))
        os.unlink(obj)
    proof = check_branches(target, mods) + ([msvc_branches(zig, dest)] if win else [])
    how = ("linked against python%s.lib, imports only python%s.dll/system/UCRT DLLs"
           % (nodot, nodot)) if win else \
        ("%d undefined symbols, all exported by libpython%s.dylib or libSystem%s"
         % (nundef, ver, "; strict link against the dylib too" if link.strict else ""))
    say("%s cp%s: %d modules compiled (%d compiler warnings, %s) and linked; %s%s"
        % (target, nodot, len(mods), warnings, os.path.join(dest, "compile.log"), how, note))
    for line in proof:
        say("  %s: %s" % (target, line))
    return dest, tag, [m[3] for m in mods]


def windows_linker(py, nodot, cc, target):
    """link(ext, obj, mod, short) for Windows: returns the symbols the module imports."""
    lib = os.path.join(py, "libs", "python%s.lib" % nodot)
    syms = set(nm("-j", lib))  # exported data has only its __imp_ pointer there
    pydata = {x[6:] for x in syms if x.startswith("__imp_") and x[6:] not in syms}

    def link(e, obj, mod, short):
        # data (PyExc_*, Py*_Type) by __imp_ pointers: a direct reference would need
        # MinGW's auto-import (runtime pseudo-relocations), unlike an MSVC build
        auto = sorted(set(nm("-uj", obj)) & pydata)
        if auto:
            fail("%s: %s: Python data not declared dllimport: %s" % (target, obj, auto))
        run(cc + ["-shared", "-s", "-o", mod, obj, lib] + ["-l" + x for x in e["libs"]])
        dlls, exports = windows_imports(mod)
        bad = [d for d in dlls if not WIN_DLLS.match(d)]
        if bad or "PyInit_" + short not in exports:
            fail("%s: %s imports %s, exports %s" % (target, mod, bad, exports))
        return {s for syms in dlls.values() for s in syms}
    return link


def macos_linker(py, ver, cls, cc, zig, target):
    """link(ext, obj, mod, short) for macOS: returns the module's undefined symbols."""
    dylib = os.path.join(py, "libpython%s.dylib" % ver)
    pyexports, sysexports = set(nm("-gUj", dylib)), libsystem_exports(zig)

    def link(e, obj, mod, short):
        # -shared: zig cannot make a -bundle; the id is the file's name, not a build path
        run(cc + ["-shared", "-Wl,-undefined,dynamic_lookup", "-Wl,-install_name," +
                  os.path.basename(mod), "-o", mod, obj])
        imported, unknown = macos_check(mod, pyexports, sysexports)
        used = run(["llvm-objdump", "--macho", "--dylibs-used", mod]).stdout.split("\n")[2:]
        if [u for u in used if u.strip() and "/usr/lib/libSystem.B.dylib" not in u]:
            fail("%s: %s loads more than libSystem: %s" % (target, mod, used))
        if unknown:
            fail("%s: %s: undefined symbols that neither libpython%s.dylib nor libSystem "
                 "exports: %s" % (target, os.path.basename(mod), ver, " ".join(unknown)))
        if "_PyInit_" + short not in nm("-gUj", mod):
            fail("%s: %s does not export PyInit_%s" % (target, mod, short))
        if link.strict:  # the linker's own word: no dynamic_lookup, against the real dylib
            run(cc + ["-shared", "-o", mod + ".strict", obj, dylib])
            os.unlink(mod + ".strict")
        return imported
    link.strict = cls == os.path.basename(py)  # the dylib is of the target's arch
    return link


MSVC_TU = """typedef long long Py_ssize_t;
#include "atomic_impl.h"
#include "crc32c_impl.h"
int f(int *p, int64_t *q, Py_ssize_t *r) {
    kcore_crc32c_init();
    return kc_cas_int(p, 1, 2) + (int)kc_add_i64(q, 3) + (int)kc_load_ssize(r) +
           (int)kcore_crc32c(0, (const uint8_t *)"x", 1);
}
"""
# what clang's MSVC-mode intrin.h includes; no Windows SDK here
MSVC_STUBS = {"string.h": "void *memcpy(void *, const void *, unsigned long long);",
              "stdlib.h": "void *malloc(unsigned long long);\nvoid free(void *);",
              "malloc.h": "", "setjmp.h": "typedef struct { int x; } jmp_buf[16];"}


def msvc_branches(zig, dest):
    """The _MSC_VER branches of atomic_impl.h and crc32c_impl.h (MinGW's clang never takes
    them), compiled by clang for x86_64-windows-msvc with stand-in C headers: as clang-cl
    sees them, then with __clang__ undefined, as cl.exe does (crc32c's __cpuid path)."""
    d = os.path.join(dest, "msvc")
    os.makedirs(d, exist_ok=True)
    for name, text in MSVC_STUBS.items():
        with open(os.path.join(d, name), "w") as f:
            f.write(text + "\n")
    with open(os.path.join(d, "t.c"), "w") as f:
        f.write(MSVC_TU)
    cmd = [zig, "cc", "-target", "x86_64-windows-msvc", "-nostdlibinc", "-isystem", d,
           "-I" + os.path.join(ROOT, "src", "kcore"), "-O2", "-c", os.path.join(d, "t.c")]
    for extra in ([], ["-U__clang__", "-mcrc32", "-Wno-builtin-macro-redefined"]):
        run(cmd + extra + ["-o", os.path.join(d, "t.o")])
        ins = instructions(os.path.join(d, "t.o"), "x86_64")
        if not {"crc32q", "cpuid"} <= ins:
            fail("MSVC-mode atomic_impl.h/crc32c_impl.h: no crc32q/cpuid")
    shutil.rmtree(d)
    return "atomic_impl.h and crc32c_impl.h's _MSC_VER branches compiled (clang, MSVC mode)"


def pure_wheel(out):
    """The pure wheel (PYPROD_NO_EXTENSIONS=1), built from a copy of the project's files."""
    pkg, dist = os.path.join(out, "pkg"), os.path.join(out, "pure")
    for d in (pkg, dist):
        shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(os.path.join(ROOT, "src"), os.path.join(pkg, "src"),
                    ignore=shutil.ignore_patterns("*.so", "*.pyd", "*.c", "__pycache__",
                                                  "*.egg-info"))
    for f in ("setup.py", "pyproject.toml", "MANIFEST.in", "README.md", "LICENSE"):
        shutil.copy(os.path.join(ROOT, f), pkg)
    run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
         dist, pkg], env=dict(os.environ, PYPROD_NO_EXTENSIONS="1"))
    shutil.rmtree(pkg)
    return os.path.join(dist, os.listdir(dist)[0])


def pack(pure, abi, plat, mods, out):
    """The pure wheel with the modules in kcore/ and the platform's tag (`wheel pack` writes
    the RECORD)."""
    d = os.path.join(out, "unpacked")
    shutil.rmtree(d, ignore_errors=True)
    run([sys.executable, "-m", "wheel", "unpack", "-d", d, pure])
    (top,) = os.listdir(d)
    top = os.path.join(d, top)
    os.unlink(os.path.join(top, "kcore", "_pure"))
    for m in mods:
        shutil.copy(m, os.path.join(top, "kcore"))
    (info,) = [x for x in os.listdir(top) if x.endswith(".dist-info")]
    whl = os.path.join(top, info, "WHEEL")
    text = re.sub(r"Root-Is-Purelib: true", "Root-Is-Purelib: false", open(whl).read())
    text = re.sub(r"Tag: .*", "Tag: %s-%s-%s" % (abi, abi, plat), text)
    with open(whl, "w") as f:
        f.write(text)
    p = run([sys.executable, "-m", "wheel", "pack", "-d", out, top])
    shutil.rmtree(d)
    name = re.search(r"(pyprod-\S+\.whl)", p.stdout).group(1)
    with zipfile.ZipFile(os.path.join(out, name)) as z:
        n = len([x for x in z.namelist() if x.endswith((".so", ".pyd"))])
    return "%s (%d modules, %d KiB)" % (name, n, os.path.getsize(os.path.join(out, name)) // 1024)


def parallel(cmds, jobs, log):
    """Runs the compile commands, jobs at a time; fails on the first error. Counts warnings."""
    warnings, pending, running = 0, list(cmds), []
    with open(log, "w") as f:
        while pending or running:
            while pending and len(running) < jobs:
                cmd = pending.pop(0)
                running.append((cmd, subprocess.Popen(cmd, stdout=subprocess.PIPE,
                                                      stderr=subprocess.STDOUT, text=True)))
            cmd, p = running.pop(0)
            text = p.communicate()[0]
            f.write("$ %s\n%s" % (" ".join(cmd), text))
            warnings += len(re.findall(r": warning: ", text))
            if p.returncode:
                for _, q in running:
                    q.kill()
                fail("compile error:\n$ %s\n%s" % (" ".join(cmd), text[-4000:]))
    return warnings


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--python", default="%d.%d" % sys.version_info[:2], choices=sorted(JARS))
    ap.add_argument("--target", action="append", choices=sorted(TARGETS),
                    help="repeatable; default: all three")
    ap.add_argument("--extra-pyx", action="append", default=[],
                    help="one more module to build and check (the script's own test)")
    ap.add_argument("--out", default=os.path.join(CACHE, "out"))
    ap.add_argument("--wheels", action="store_true", help="pack each target into a wheel")
    a = ap.parse_args()
    import ziglang
    zig = os.path.join(os.path.dirname(ziglang.__file__), "zig")
    out = os.path.join(a.out, a.python)
    src = sources(out, a.extra_pyx)
    built = [build(t, a.python, src, zig, out, max(1, min(2, os.cpu_count() or 1)))
             for t in a.target or list(TARGETS)]
    if a.wheels:
        pure = pure_wheel(out)
        for dest, tag, mods in built:
            say("wheel: " + pack(pure, "cp" + a.python.replace(".", ""), tag, mods, a.out))


if __name__ == "__main__":
    main()
