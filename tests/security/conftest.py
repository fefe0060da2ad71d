"""Fixtures of the OIDC tests (test_oidc*.py): ``idp`` and ``oidc_kafka`` from
tests/harness/oidc_fixtures.py (shared with tests/spark/test_spark_oidc.py)."""
from tests.harness.oidc_fixtures import idp, oidc_kafka  # noqa: F401  (pytest fixtures)
