"""Lets `pytest bench/` collect bench_*.py (files passed explicitly are collected anyway)."""
import pytest


def pytest_collect_file(file_path, parent):
    if file_path.name.startswith("bench_") and file_path.suffix == ".py":
        if not parent.session.isinitpath(file_path):
            return pytest.Module.from_parent(parent, path=file_path)
    return None

