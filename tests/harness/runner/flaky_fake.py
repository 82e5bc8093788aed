"""A scenario that fails on its first attempts only, against the fake session: every
attempt opens a new :class:`FakeSession` (fresh clusters); the first ``failures`` sessions
lack the metric the scenario expects, later ones have it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from runner_fake import FakeSession

from harness.environment import EnvironmentSpec

TARGET, METRIC = "webhook/skr-a", "watcher_ready"
FLAKY = f"""name: sometimes-ready
description: fails on its first attempt only
tags: [retry-demo]
clusters: {{skrs: [{{name: skr-a}}]}}
steps:
  - name: check
    try:
      - expect:
          within: 100ms
          metrics: [{{target: {TARGET}, name: {METRIC}, op: "==", value: 1}}]
"""


class FlakyOpener:
    """``open_session`` for :class:`~harness.runner.scenario.RunOptions`; ``sessions``
    holds every session opened, in order."""

    def __init__(self, failures: int = 1) -> None:
        self.failures = failures
        self.sessions: list[FakeSession] = []

    def __call__(self, spec: EnvironmentSpec) -> Any:
        return self._open(spec)

    @asynccontextmanager
    async def _open(self, spec: EnvironmentSpec) -> AsyncIterator[FakeSession]:
        session = FakeSession(spec=spec)
        if len(self.sessions) >= self.failures:
            session.metrics[(TARGET, METRIC)] = 1.0
        self.sessions.append(session)
        yield session


def flaky_opener(failures: int = 1) -> Callable[[EnvironmentSpec], Any]:
    return FlakyOpener(failures)
