"""pytest plugin for scripts/sanitize.sh: the session stops before any test unless every compiled
kcore module is the sanitized build (its file under PYPROD_SANITIZE_BUILD, ASan and UBSan checks
compiled in) and the ASan runtime is loaded in this process."""
import importlib
import os

import pytest


def pytest_sessionstart(session):
    import kcore

    build = os.path.realpath(os.environ["PYPROD_SANITIZE_BUILD"])
    if not kcore.EXTENSIONS:
        raise pytest.UsageError("sanitize: PYPROD_NO_EXTENSIONS=1 leaves nothing to sanitize")
    # internal modules, not in KERNELS
    modules = kcore.KERNELS + ("send_choice", "batch_columns", "numpy_columns")
    for name in modules:
        path = os.path.realpath(importlib.import_module("kcore." + name).__file__)
        if not path.startswith(build + os.sep):
            raise pytest.UsageError(f"sanitize: kcore.{name} loaded from {path}, not {build}")
        with open(path, "rb") as f:
            so = f.read()
        if b"__asan_report_" not in so or b"__ubsan_handle_" not in so:
            raise pytest.UsageError(f"sanitize: {path} has no ASan/UBSan checks compiled in")
    with open("/proc/self/maps") as f:
        if "libasan" not in f.read():
            raise pytest.UsageError("sanitize: the ASan runtime is not loaded (LD_PRELOAD)")
    print(f"sanitize: {len(modules)} kcore modules from {build}, ASan+UBSan loaded")
