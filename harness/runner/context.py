"""The state of one running scenario that operations share: the session, the report being
built, the current expectation window, the churns run so far and the Watcher rules as they
changed over time (for the ground truth)."""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.churn.admissions import AdmissionCounts
from harness.churn.model import ExecutedMutation, Mutation
from harness.churn.plan import ChurnSpec
from harness.churn.runner import ChurnRun
from harness.churn.truth import Rule
from harness.expect.observations import ObjectChange
from harness.report.builder import ScenarioBuilder
from harness.report.model import TimelineKind
from harness.runner.session import Session
from harness.scenario import Expect, ExpectOp, Scenario
from watcher.render.watcher_cr import Watcher, parse_watcher

OBJECT_CHANGES_KEPT = 20_000
"""Object changes the ``timeline`` watches keep (the oldest go first)."""
SETTLE_MARGIN = 0.5
"""Seconds added to how long a Watcher change took to go live: writes that close to a
change may or may not be seen by its webhook (``harness.churn.truth``, uncertain causes)."""


@dataclass
class ChurnRecord:
    """One churn operation: its plan, what it executed so far, and its task if background."""

    spec: ChurnSpec
    plan: list[Mutation]
    started_at: float
    executed: list[ExecutedMutation] = field(default_factory=list)
    task: asyncio.Task[None] | None = None
    result: ChurnRun | None = None
    verified: bool = False
    ended_at: float | None = None
    admissions_before: dict[str, AdmissionCounts | None] = field(default_factory=dict)
    admissions_after: dict[str, AdmissionCounts | None] = field(default_factory=dict)
    """Per SKR: the API server's webhook call counters before and after the churn
    (``harness.churn.admissions``; ``None`` where they could not be read)."""
    admission_gaps: dict[str, list[AdmissionCounts | None]] = field(default_factory=dict)
    """Per SKR: the counters read before each stop of its API server during the churn
    (``harness.churn.admissions.Gap``)."""

    @property
    def finished(self) -> bool:
        return self.result is not None


@dataclass(frozen=True)
class WriteRecord:
    """A write by an apply/patch/delete operation (for latency and the timeline)."""

    cluster: str
    namespace: str
    name: str
    sent_at: float


@dataclass
class WatcherVersion:
    watcher: Watcher
    since: float | None = None
    until: float | None = None


@dataclass
class RunContext:
    scenario: Scenario
    session: Session
    report: ScenarioBuilder
    base_dir: Path = Path(".")
    clock: Callable[[], float] = time.time
    window_start: float = 0.0
    churns: list[ChurnRecord] = field(default_factory=list)
    writes: list[WriteRecord] = field(default_factory=list)
    watchers: list[WatcherVersion] = field(default_factory=list)
    settle: float = 0.0
    step: str = ""
    baselines: dict[tuple[str, str], float] = field(default_factory=dict)
    """(listener, reason) → rejections counted when the window opened."""
    run_id: str = ""
    """The run's id (the ``runId`` binding)."""
    log_dir: Path | None = None
    """Where the scenario's logs go (full ``script`` output); ``None``: not kept."""
    object_changes: deque[ObjectChange] = field(
        default_factory=lambda: deque(maxlen=OBJECT_CHANGES_KEPT)
    )
    """What the object watches of ``timeline`` expectations recorded
    (:mod:`harness.runner.object_watches`)."""
    captured: dict[str, Any] = field(default_factory=dict)
    """Names given values during the run (``capture``, ``set``), for ``${{ name }}``."""
    _outputs: int = 0

    def __post_init__(self) -> None:
        for w in self.scenario.watchers:
            self.watchers.append(WatcherVersion(parse_watcher(w.to_dict())))

    def open_window(self) -> None:
        """Start a new expectation window now (a step began or an ``expect`` ended)."""
        self.window_start = self.clock()
        for op in expects(self.scenario):
            for r in op.rejections:
                key = (r.listener, r.reason)
                self.baselines[key] = self.session.rejections(*key)

    # -- facts --------------------------------------------------------------------

    @property
    def runtime_ids(self) -> dict[str, str]:
        return {s.name: s.runtime_id for s in self.scenario.clusters.skrs}

    def rules(self) -> tuple[Rule, ...]:
        """Every Watcher as it was over time, as ground-truth rules."""
        return tuple(
            Rule.from_watcher(v.watcher, since=v.since, until=v.until) for v in self.watchers
        )

    def webhook_managers(self) -> dict[str, str]:
        """Webhook name → manager, for every Watcher the scenario had at any time."""
        return {v.watcher.webhook_name: v.watcher.manager for v in self.watchers}

    def watcher_namespace(self, name: str) -> str | None:
        for v in reversed(self.watchers):
            if v.watcher.name == name:
                return v.watcher.namespace
        return None

    # -- recording ------------------------------------------------------------------

    def capture(self, values: dict[str, Any], source: str) -> None:
        """Give names values for the rest of the run; each goes on the timeline."""
        for name, value in values.items():
            self.captured[name] = value
            shown = repr(value) if not isinstance(value, str) else value
            self.report.event(
                TimelineKind.STEP, "runner", f"${{{{ {name} }}}}", f"= {shown[:120]} ({source})"
            )

    def log_output(self, title: str, text: str) -> Path | None:
        """Keep a command's whole output in the log directory (the report truncates)."""
        if self.log_dir is None:
            return None
        self._outputs += 1
        path = self.log_dir / f"output-{self._outputs:03d}-{self.step or 'setup'}.log"
        path.write_text(f"{title}\n{text}", encoding="utf-8")
        return path

    def watcher_changed(
        self, name: str, namespace: str, new: Watcher | None, started: float, done: float
    ) -> None:
        """Close the current version of ``namespace/name`` and open ``new`` (if any)."""
        for v in self.watchers:
            same = v.watcher.name == name and v.watcher.namespace == namespace
            if same and v.until is None:
                v.until = started
        if new is not None:
            self.watchers.append(WatcherVersion(new, since=started))
        self.settle = max(self.settle, done - started + SETTLE_MARGIN)

    def wrote(
        self, cluster: str, kind: str, namespace: str, name: str, detail: str, at: float
    ) -> None:
        """Record a write sent at ``at`` by apply/patch/delete."""
        self.writes.append(WriteRecord(cluster, namespace, name, at))
        obj = f"{namespace}/{kind}/{name}" if namespace else f"{kind}/{name}"
        self.report.event(TimelineKind.MUTATION, cluster, obj, detail, at=at)

    def executed(self, item: ExecutedMutation) -> None:
        m = item.mutation
        detail = m.operation + ("" if item.ok else f" failed: {item.error}")
        self.report.event(
            TimelineKind.MUTATION,
            m.cluster,
            f"{m.namespace}/{m.kind.kind}/{m.name}",
            detail,
            at=item.sent_at,
        )


def expects(scenario: Scenario) -> list[Expect]:
    """Every ``expect`` of every step, in file order."""
    return [
        op.expect for step in scenario.steps for op in step.operations() if isinstance(op, ExpectOp)
    ]
