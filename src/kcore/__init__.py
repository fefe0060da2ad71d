"""kcore: pyprod's compiled hot path.

Each kernel is a Cython module (``kcore/<name>.pyx``) whose ``.pxd`` exposes ``nogil`` entry points
to other kcore modules, and a pure-Python twin (``kcore/pure/<name>.py``) with the same public API.
The compiled modules are used unless ``PYPROD_NO_EXTENSIONS=1``; a missing extension is an
ImportError, never a silent fallback. Python code both run is in ``kcore/shared``: the twins
import it and the compiled modules compile it in, so the compiled build never loads a twin.
"""
import os
from importlib import import_module
from types import SimpleNamespace

KERNELS = ("varint", "crc", "murmur", "record_batch_builder", "buffer_pool", "timing_wheel",
           "future", "producer_batch", "transaction_manager", "builtin_partitioner",
           "partition_queue", "record_accumulator", "send_path", "batch_send", "selector",
           "channel", "produce_codec", "network_poll", "sender_loop")
MODULES = ("network_poll",)  # kernels whose functions are used as a module: kcore.<name>
EXTENSIONS = os.environ.get("PYPROD_NO_EXTENSIONS") != "1"


def kernels(pure=not EXTENSIONS):
    """Every public name of one implementation (compiled or pure) as a namespace."""
    prefix = "kcore.pure." if pure else "kcore."
    names = {}
    for kernel in KERNELS:
        mod = import_module(prefix + kernel)
        names.update((n, getattr(mod, n)) for n in mod.__all__)
        if kernel in MODULES:
            names[kernel] = mod
    return SimpleNamespace(pure=pure, **names)


_active = vars(kernels())
__all__ = sorted(n for n in _active if n != "pure")
globals().update((n, _active[n]) for n in __all__)
del _active
