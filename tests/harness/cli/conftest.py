"""Fixtures of the command-line tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def own_harness_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`up` state files go to this test's cache (so they never meet a user's environment);
    the cluster binaries stay shared. The cache directory."""
    from harness.clusters.go_build import cache_root

    shared = cache_root()
    cache = tmp_path / "cache"
    cache.mkdir()
    monkeypatch.setenv("WATCHER_HARNESS_CACHE", str(cache))
    if (shared / "bin").is_dir():
        (cache / "bin").symlink_to(shared / "bin")
    return cache
