"""Building a run report while the run happens (the mutable side of :mod:`.model`).

The runner opens a :class:`ScenarioBuilder` per scenario, records steps, expectations,
timeline entries, latencies, processes and metrics as they happen, and ``finish()``-es it;
:meth:`ReportBuilder.build` freezes everything into a :class:`~.model.RunReport`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence

from harness.report.model import (
    Attachment,
    AttemptReport,
    Branch,
    ExpectationResult,
    MachineInfo,
    ProcessInfo,
    ProcessRecordLike,
    RunReport,
    ScenarioReport,
    Status,
    StepReport,
    TimelineEntry,
    TimelineKind,
    expectation_id,
)

NOT_CHECKS = frozenset({"collect"})
"""Expectation kinds that check nothing (they always pass): a scenario recording only
these is skipped, not passed."""


class ScenarioBuilder:
    """Collects one scenario's steps, expectations, timeline and processes as they happen."""

    def __init__(self, name: str, file: str, *, clock: Callable[[], float]) -> None:
        self.name = name
        self.file = file
        self._clock = clock
        self.started_at = clock()
        self.steps: list[StepReport] = []
        self.expectations: list[ExpectationResult] = []
        self.timeline: list[TimelineEntry] = []
        self.latencies_ms: list[float] = []
        self.processes: list[ProcessInfo] = []
        self.metrics: dict[str, float] = {}
        self._per_step: dict[str, int] = {}
        self.attempts: list[AttemptReport] = []  # earlier attempts (see ReportBuilder.retry)
        self.report: ScenarioReport | None = None  # set by finish()

    def step(
        self,
        name: str,
        status: Status,
        duration: float,
        *,
        branch: Branch = Branch.TRY,
        error: str | None = None,
    ) -> StepReport:
        step = StepReport(name, status, duration, branch, error)
        self.steps.append(step)
        return step

    def expectation(
        self,
        *,
        step: str,
        kind: str,
        description: str,
        expected: str,
        actual: str,
        passed: bool,
        duration: float = 0.0,
        details: str = "",
        attachments: Sequence[Attachment] = (),
    ) -> ExpectationResult:
        """Record a checked expectation; its id numbers it within ``step`` from 1."""
        index = self._per_step.get(step, 0) + 1
        self._per_step[step] = index
        result = ExpectationResult(
            id=expectation_id(self.name, step, index, kind),
            kind=kind,
            description=description,
            expected=expected,
            actual=actual,
            passed=passed,
            duration=duration,
            details=details,
            attachments=tuple(attachments),
        )
        self.expectations.append(result)
        return result

    def event(
        self,
        kind: TimelineKind,
        source: str,
        object: str,
        detail: str = "",
        *,
        at: float | None = None,
    ) -> TimelineEntry:
        """Add a timeline entry, stamped now unless ``at`` says when it happened."""
        entry = TimelineEntry(self._clock() if at is None else at, kind, source, object, detail)
        self.timeline.append(entry)
        return entry

    def latencies(self, values_ms: Iterable[float]) -> None:
        self.latencies_ms.extend(float(v) for v in values_ms)

    def process(self, process: ProcessInfo | ProcessRecordLike) -> None:
        """Attach a process; records are copied now, so pass them once they have exited."""
        info = process if isinstance(process, ProcessInfo) else ProcessInfo.from_record(process)
        self.processes.append(info)

    def set_metrics(self, snapshot: Mapping[str, float]) -> None:
        self.metrics.update(snapshot)

    @property
    def checked(self) -> bool:
        """Whether anything was checked: an expectation of a kind that can fail (not a
        ``collect`` entry, which is material for the report and always passes)."""
        return any(e.kind not in NOT_CHECKS for e in self.expectations)

    def unchecked_reason(self) -> str:
        """Why a scenario that checked nothing is skipped: the skipped steps' reasons
        (steps with the same reason named together), else ``checked nothing``."""
        by_reason: dict[str, list[str]] = {}
        for s in self.steps:
            if s.status is Status.SKIPPED:
                by_reason.setdefault(s.error or "skipped", []).append(s.name)
        if not by_reason:
            return "checked nothing"
        parts = [
            f"{'steps' if len(names) > 1 else 'step'} {', '.join(names)}: {reason}"
            for reason, names in by_reason.items()
        ]
        return "checked nothing; skipped " + "; ".join(parts)

    def derived_status(self) -> Status:
        """Failed if any expectation or step failed; else skipped if nothing was checked
        (:attr:`checked`): a run that proved nothing must not read as passed; else passed."""
        if any(not e.passed for e in self.expectations):
            return Status.FAILED
        if any(s.status in (Status.FAILED, Status.ERROR) for s in self.steps):
            return Status.FAILED
        if not self.checked:
            return Status.SKIPPED
        return Status.PASSED

    def finish(self, status: Status | None = None, *, error: str | None = None) -> ScenarioReport:
        """Freeze the scenario; status defaults to error if ``error`` is given, else derived
        (skipped with :meth:`unchecked_reason` as its ``error`` when nothing was checked).
        Passed after earlier failed attempts is flaky."""
        if status is None:
            status = Status.ERROR if error is not None else self.derived_status()
            if status is Status.SKIPPED:
                error = self.unchecked_reason()
        if status is Status.PASSED and self.attempts:
            status = Status.FLAKY
        self.report = ScenarioReport(
            name=self.name,
            file=self.file,
            status=status,
            started_at=self.started_at,
            duration=max(0.0, self._clock() - self.started_at),
            error=error,
            steps=tuple(self.steps),
            expectations=tuple(self.expectations),
            timeline=tuple(sorted(self.timeline, key=lambda t: t.at)),
            latencies_ms=tuple(self.latencies_ms),
            processes=tuple(self.processes),
            metrics=dict(self.metrics),
            attempts=tuple(self.attempts),
        )
        return self.report


class ReportBuilder:
    """The mutable side of a run report: open scenarios, fill them, then ``build()``.

    Not thread-safe; the runner is single-threaded asyncio. A scenario never finished
    appears in the report as an error, so a crash still leaves a readable report.
    """

    def __init__(
        self,
        run_id: str,
        *,
        machine: MachineInfo | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.run_id = run_id
        self.machine = machine or MachineInfo.current()
        self._clock = clock
        self.started_at = clock()
        self._scenarios: list[ScenarioBuilder] = []

    def scenario(self, name: str, file: str) -> ScenarioBuilder:
        if any(s.name == name for s in self._scenarios):
            raise ValueError(f"scenario {name!r} is already in report {self.run_id!r}")
        builder = ScenarioBuilder(name, file, clock=self._clock)
        self._scenarios.append(builder)
        return builder

    def retry(self, previous: ScenarioBuilder) -> ScenarioBuilder:
        """A fresh builder for running ``previous``'s scenario again; it takes
        ``previous``'s place in the report and keeps its finished attempt (and the ones
        before) as :class:`~.model.AttemptReport` s."""
        if previous not in self._scenarios:
            raise ValueError(f"scenario {previous.name!r} is not in report {self.run_id!r}")
        if previous.report is None:
            raise ValueError(f"scenario {previous.name!r}: finish an attempt before retrying")
        builder = ScenarioBuilder(previous.name, previous.file, clock=self._clock)
        number = len(previous.attempts) + 1
        builder.attempts = [*previous.attempts, AttemptReport.of(number, previous.report)]
        self._scenarios[self._scenarios.index(previous)] = builder
        return builder

    def build(self) -> RunReport:
        scenarios = []
        for s in self._scenarios:
            if s.report is None:
                s.finish(Status.ERROR, error="the scenario did not finish (the run was aborted)")
            assert s.report is not None
            scenarios.append(s.report)
        return RunReport(
            run_id=self.run_id,
            started_at=self.started_at,
            finished_at=self._clock(),
            machine=self.machine,
            scenarios=tuple(scenarios),
        )
