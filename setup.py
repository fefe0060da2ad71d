"""Declares the kcore extensions. A failed compile fails the build; only
PYPROD_NO_EXTENSIONS=1 builds without them (the pure-Python twins)."""
import os
import sys
import sysconfig
from glob import glob

from setuptools import Extension, setup


def extensions():
    if os.environ.get("PYPROD_NO_EXTENSIONS") == "1":
        return []
    from Cython.Build import cythonize

    only = set(filter(None, os.environ.get("KCORE_ONLY", "").split(",")))  # dev: build a subset
    args = ["/O2"] if sys.platform == "win32" else ["-O3"]
    macros = []
    if sys.platform == "win32" and sysconfig.get_config_var("Py_GIL_DISABLED"):
        macros.append(("Py_GIL_DISABLED", "1"))  # Windows' shared pyconfig.h lacks it
    mods = [
        Extension(
            "kcore." + os.path.splitext(os.path.basename(p))[0],
            [p],
            include_dirs=["src/kcore"],
            extra_compile_args=args,
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


setup(ext_modules=extensions())
