"""Fixtures shared by every harness test: the real cluster binaries, ensured once."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.clusters.binaries import Binaries, ensure_binaries, kube_apiserver_path
from harness.clusters.go_build import cache_root
from harness.errors import BinaryUnavailable

FIRST_BUILD_TIMEOUT = 1800  # s: compiling kube-apiserver on 2 cores takes minutes
HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Give e2e tests time for a first build of kube-apiserver, if one is due."""
    if kube_apiserver_path(cache_root()).is_file():
        return
    for item in items:
        if item.get_closest_marker("e2e") and HERE in item.path.parents:
            item.add_marker(pytest.mark.timeout(FIRST_BUILD_TIMEOUT), append=False)


@pytest.fixture(scope="session")
def cluster_binaries() -> Binaries:
    """kube-apiserver (built and cached if needed) and etcd; skip only if unobtainable."""
    try:
        return ensure_binaries()
    except BinaryUnavailable as e:
        pytest.skip(f"cluster binaries unavailable: {e}")
