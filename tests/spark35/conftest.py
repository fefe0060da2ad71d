"""The Spark 3.5 venv (tests/harness/spark35.py), built once per machine and requirement set.
A venv that cannot be built, or no Java that Spark 3.5 runs on, is a failure."""
import sys

import pytest

from tests.harness import spark35 as harness


@pytest.fixture(scope="session")
def spark35():
    try:
        venv, lock = harness.ensure_venv()
    except harness.Spark35Unavailable as e:
        pytest.fail(f"no Spark 3.5 venv: {e}")
    how = f"built in {venv.built_s} s" if venv.built_s is not None else "reused"
    sys.stderr.write(f"\nspark35: {venv.path} ({how}; first build took "
                     f"{venv.info['build_s']} s), JAVA_HOME={venv.java_home}\n")
    yield venv
    lock.close()
