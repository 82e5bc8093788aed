"""Fixtures every test package may use (here, not in tests/, so that ``tests/`` never
lands on sys.path where ``tests/harness`` would shadow the real ``harness`` package)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from harness.clusters.pool import CURRENT
from harness.runner import ordering
from harness.runner.exclusive import MARKER, lock_dir, turn

_durations: dict[str, float] = {}
"""This run's e2e item durations, kept for the next run's order (xdist controller)."""


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Under ``-m e2e`` (``make e2e``) a test module that never names the marker is not even
    imported: each of the workers collected all ~1,700 tests to keep ~110, 15 s on 2 cores
    before the first item started."""
    name = collection_path.name
    if config.getoption("markexpr") != "e2e" or not (
        name.startswith("test_") and name.endswith(".py")
    ):
        return None
    return True if b"e2e" not in collection_path.read_bytes() else None


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """e2e items longest first, those marked ``exclusive`` before the others
    (:mod:`harness.runner.ordering`); the others keep their order, before them."""
    recorded = ordering.load(ordering.durations_file())

    def expected(item: pytest.Item) -> float:
        if item.get_closest_marker("e2e") is None:
            return float("inf")
        scenario = getattr(item, "scenario", None)
        timeout = None  # a scenario's default timeout says nothing about it
        if scenario is not None and "timeout" in scenario.model_fields_set:
            timeout = float(scenario.timeout)
        return ordering.estimate(recorded.get(item.nodeid), timeout)

    items[:] = ordering.longest_first(items, expected, first=_exclusive)
    _exclusive_items.update(item.nodeid for item in items if _exclusive(item))


def _exclusive(item: pytest.Item) -> bool:
    return item.get_closest_marker("exclusive") is not None


_exclusive_items: set[str] = set()
"""The run's items that bound a latency: no other item starts before they all have."""


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Remember how long each e2e item took (in the xdist controller, or a run without)."""
    if report.when == "call" and "e2e" in report.keywords and report.outcome != "skipped":
        _durations[report.nodeid] = report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    if _durations and not hasattr(session.config, "workerinput"):
        ordering.save(ordering.durations_file(), _durations)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    """Under xdist, an item marked ``exclusive`` runs beside at most one other item
    (:mod:`harness.runner.exclusive`)."""
    workerinput = getattr(item.config, "workerinput", None)
    if workerinput is None:
        yield
        return
    directory = lock_dir(str(workerinput["testrunuid"]))
    worker = int(workerinput["workerid"].removeprefix("gw"))
    with turn(
        directory,
        worker,
        exclusive=_exclusive(item),
        item=item.nodeid,
        exclusive_items=_exclusive_items,
    ):
        yield


@pytest.fixture(autouse=True)
def cluster_pool(request: pytest.FixtureRequest) -> Iterator[None]:
    """Under ``--cluster-pool`` an e2e test's environments take their local clusters from
    this worker's pool, as scenarios do (:mod:`harness.clusters.pool`)."""
    pool = None
    if request.node.get_closest_marker("e2e") is not None:
        from harness.runner.pytest_plugin import session_pool

        pool = session_pool(request.config)
    token = CURRENT.set(pool)
    yield
    CURRENT.reset(token)


@pytest.fixture
async def no_leaked_tasks() -> AsyncIterator[None]:
    """Fail a test that leaves asyncio tasks running (aiohttp's own get a moment to finish).

    Packages whose tests are all async make it autouse in their conftest; others name it.
    """
    before = asyncio.all_tasks()
    yield
    current = asyncio.current_task()
    leftover = asyncio.all_tasks() - before - {current}
    if leftover:
        _, pending = await asyncio.wait(leftover, timeout=1.0)
        for task in pending:
            task.cancel()
        assert not pending, f"test leaked tasks: {pending}"
