"""tests/fuzz: every decoder of network bytes over random and mutated inputs (a bounded,
deterministic number here; scripts/fuzz.py is the long run)."""
import logging

import pytest

from tests.harness.fuzz_targets import targets


@pytest.fixture(scope="session")
def fuzz_targets():
    """{name: Target} on the active kcore (compiled when built)."""
    return targets()


@pytest.fixture(autouse=True)
def _quiet_network_client():
    """The NetworkClient harness logs every error response it handles: keep reports short."""
    logger = logging.getLogger("pyprod.network_client")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    yield
    logger.setLevel(level)
