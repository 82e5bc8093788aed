"""Fixtures every test package may use (here, not in tests/, so that ``tests/`` never
lands on sys.path where ``tests/harness`` would shadow the real ``harness`` package)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import pytest

from harness.runner.exclusive import MARKER, lock_dir, turn


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    """Under xdist, an item marked ``exclusive`` runs beside at most one other item
    (:mod:`harness.runner.exclusive`)."""
    workerinput = getattr(item.config, "workerinput", None)
    if workerinput is None:
        yield
        return
    directory = lock_dir(str(workerinput["testrunuid"]))
    worker, workers = int(workerinput["workerid"].removeprefix("gw")), workerinput["workercount"]
    exclusive = item.get_closest_marker("exclusive") is not None
    with turn(directory, worker, int(workers), exclusive=exclusive):
        yield


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
