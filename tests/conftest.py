import pytest

import kcore
from tests.harness.fixtures import *  # noqa: F401,F403  (kafka, kafka3, topic, tansu, ...)

IMPLS = ["python"] + (["c"] if kcore.EXTENSIONS else [])


@pytest.fixture(params=IMPLS, scope="session")
def k(request):
    """One kcore implementation (compiled or pure twin); every kernel test runs on each."""
    return kcore.kernels(pure=request.param == "python")


@pytest.fixture(scope="session")
def both():
    """Both implementations, for byte-identity checks (pure twice without extensions)."""
    return kcore.kernels(pure=True), kcore.kernels(pure=not kcore.EXTENSIONS)
