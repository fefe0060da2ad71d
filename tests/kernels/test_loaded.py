import importlib.machinery
import os

import kcore


def test_extensions_really_loaded():
    if os.environ.get("PYPROD_NO_EXTENSIONS") == "1":
        assert not kcore.EXTENSIONS
        return
    assert kcore.EXTENSIONS
    for name in kcore.KERNELS:
        mod = importlib.import_module("kcore." + name)
        assert mod.__file__.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES)), mod.__file__


def test_public_api_is_the_same_in_both():
    c, py = kcore.kernels(pure=False) if kcore.EXTENSIONS else None, kcore.kernels(pure=True)
    if c is not None:
        assert set(vars(c)) == set(vars(py))
