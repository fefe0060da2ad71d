"""Declares the kcore extensions. A failed compile fails the build; only
PYPROD_NO_EXTENSIONS=1 builds without them (the pure-Python twins)."""
import os
import sys
from glob import glob

from setuptools import Extension, setup


def extensions():
    if os.environ.get("PYPROD_NO_EXTENSIONS") == "1":
        return []
    from Cython.Build import cythonize

    only = set(filter(None, os.environ.get("KCORE_ONLY", "").split(",")))  # dev: build a subset
    args = ["/O2"] if sys.platform == "win32" else ["-O3"]
    mods = [
        Extension(
            "kcore." + os.path.splitext(os.path.basename(p))[0],
            [p],
            include_dirs=["src/kcore"],
            extra_compile_args=args,
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
        },
    )


setup(ext_modules=extensions())
