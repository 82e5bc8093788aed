"""Every scenario file here is a pytest item (``pytest -n 2 -m e2e scenarios/``); see
:mod:`harness.runner.pytest_plugin`."""

from harness.runner.pytest_plugin import (
    pytest_addoption,
    pytest_collect_file,
    pytest_configure,
    pytest_sessionfinish,
    pytest_sessionstart,
)

__all__ = [
    "pytest_addoption",
    "pytest_collect_file",
    "pytest_configure",
    "pytest_sessionfinish",
    "pytest_sessionstart",
]
