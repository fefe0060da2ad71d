"""Broker fixtures for the network tests: the ones in tests/integration/conftest.py, re-exported
(kafka, tansu, mock_cluster, topic, and the hook that attaches broker logs to failures)."""
import importlib.util
import pathlib

_path = pathlib.Path(__file__).resolve().parent.parent / "integration" / "conftest.py"
_spec = importlib.util.spec_from_file_location("_pyprod_integration_fixtures", _path)
_mod = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_mod)

kafka = _mod.kafka
tansu = _mod.tansu
mock_cluster = _mod.mock_cluster
topic = _mod.topic
pytest_runtest_makereport = _mod.pytest_runtest_makereport
