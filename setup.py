"""Declares the kcore extensions. A failed compile fails the build; only
PYPROD_NO_EXTENSIONS=1 builds without them (the pure-Python twins), and such a build ships the
marker kcore/_pure so that it imports its twins without the variable."""
import os
import shutil
import sys
import sysconfig
from glob import glob

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

PURE = os.environ.get("PYPROD_NO_EXTENSIONS") == "1"
FALLBACK = "or PYPROD_NO_EXTENSIONS=1 for the pure-Python build (slower, no compiler needed)"


class BuildExt(build_ext):
    """One clear line when there is no compiler; no build-machine RUNPATH in the modules."""

    def build_extensions(self):
        cc = getattr(self.compiler, "compiler_so", None)  # unix compilers (not MSVC)
        if cc and not shutil.which(cc[0]):
            sys.exit(f"error: pyprod: building kcore needs a C compiler ({cc[0]} not found): "
                     f"install one, {FALLBACK}")
        ld = getattr(self.compiler, "linker_so", None)
        if ld:  # e.g. pyenv's -Wl,-rpath,<its lib>: the wheel must not carry it
            self.compiler.linker_so = [a for a in ld if not a.startswith("-Wl,-rpath")]
        super().build_extensions()


class BuildPy(build_py):
    def run(self):
        super().run()
        marker = os.path.join(self.build_lib, "kcore", "_pure")
        if PURE and not getattr(self, "editable_mode", False):  # a source tree keeps the variable
            with open(marker, "w") as f:
                f.write("built with PYPROD_NO_EXTENSIONS=1: kcore uses its pure-Python twins\n")
        elif os.path.exists(marker):  # left in build/ by an earlier pure build
            os.unlink(marker)


def extensions():
    if PURE:
        return []
    try:
        from Cython.Build import cythonize
    except ImportError:
        sys.exit(f"error: pyprod: building kcore needs Cython>=3.1 (pip install Cython), {FALLBACK}")

    only = set(filter(None, os.environ.get("KCORE_ONLY", "").split(",")))  # dev: build a subset
    # Small wheels: no debug info, stripped on Linux (PyInit_* stays in the dynamic symbols),
    # unless CFLAGS asks for -g (scripts/sanitize.sh, free_threaded.sh: readable reports).
    keep = "-g" in os.environ.get("CFLAGS", "").split()
    args = ["/O2"] if sys.platform == "win32" else ["-O3"] + ([] if keep else ["-g0"])
    link = ["-s"] if sys.platform.startswith("linux") and not keep else []
    macros = []
    if sys.platform == "win32" and sysconfig.get_config_var("Py_GIL_DISABLED"):
        macros.append(("Py_GIL_DISABLED", "1"))  # Windows' shared pyconfig.h lacks it
    mods = [
        Extension(
            "kcore." + os.path.splitext(os.path.basename(p))[0],
            [p],
            include_dirs=["src/kcore"],
            extra_compile_args=args,
            extra_link_args=link,
            define_macros=macros,
            libraries=["ws2_32"] if sys.platform == "win32" and p.endswith(("selector.pyx", "channel.pyx")) else [],
        )
        for p in sorted(glob("src/kcore/*.pyx"))
        if not only or os.path.basename(p)[:-4] in only
    ]
    return cythonize(
        mods,
        compiler_directives={
            "language_level": 3,
            "boundscheck": False,
            "wraparound": False,
            "cdivision": True,
            "embedsignature": True,
            # Every module at once (one without it turns the GIL back on for all): kcore's
            # shared state has its own locks, written in each .pxd (docs/free_threading.md).
            "freethreading_compatible": True,
        },
    )


setup(ext_modules=extensions(), cmdclass={"build_ext": BuildExt, "build_py": BuildPy})
