"""The run report: what happened in a run, as frozen data with a JSON form.

The runner fills a :class:`~harness.report.builder.ReportBuilder` while scenarios run;
``build()`` turns it into a :class:`RunReport`, which the writers (``junit``, ``html``,
``writer``) render. Times are wall-clock seconds since the epoch (``time.time()``);
durations are seconds; latencies are milliseconds. The classes are pydantic dataclasses:
constructing one coerces sequences to tuples and strings to paths, and
``RunReport.to_json`` / ``from_json`` are pydantic's serialisation of the fields (enums as
their values), which round-trips exactly.
"""

from __future__ import annotations

import json
import os
import platform
from collections.abc import Mapping
from dataclasses import field, fields
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol

from pydantic import TypeAdapter, ValidationError
from pydantic.dataclasses import dataclass

from harness.errors import HarnessError


class ReportError(HarnessError):
    """Base of the report package's errors."""


class ReportFormatError(ReportError, ValueError):
    """A stored report (JSON) cannot be read back; the message names the field."""


SCHEMA_VERSION = 1
"""Version of the JSON form; bumped when a field changes meaning or is removed. Added fields
(e.g. a scenario's ``attempts``) have defaults, so older reports still load."""


class Status(StrEnum):
    """Outcome of a scenario or a step."""

    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"  # the harness could not run it as written (setup failure, crash)
    SKIPPED = "skipped"
    FLAKY = "flaky"  # scenarios only: an attempt failed, a later attempt (a retry) passed


class Branch(StrEnum):
    """Which block of a step a step report belongs to (chainsaw's try / catch / finally)."""

    TRY = "try"
    CATCH = "catch"
    FINALLY = "finally"


class TimelineKind(StrEnum):
    """What a timeline entry records."""

    MUTATION = "mutation"  # the harness changed an object in a cluster
    EVENT = "event"  # a manager received a WatchEvent
    RECONCILE = "reconcile"  # the Lifecycle-Manager stand-in reconciled a Kyma
    FAULT = "fault"  # a fault was injected or lifted
    STEP = "step"  # a step started or ended
    OBJECT = "object"  # an object watch saw an object added, modified or deleted


def expectation_id(scenario: str, step: str, index: int, kind: str) -> str:
    """The stable name of an expectation: ``<scenario>/<step>/<index>-<kind>``.

    ``index`` counts the expectations of a step from 1, in the order the file lists them,
    so the name survives re-runs and unrelated edits elsewhere in the file.
    """
    return f"{scenario}/{step}/{index}-{kind}"


@dataclass(frozen=True)
class MachineInfo:
    """Where the run happened: enough to compare timings between runs."""

    cores: int
    python: str
    versions: Mapping[str, str] = field(default_factory=dict)  # component → version

    @classmethod
    def current(cls, versions: Mapping[str, str] | None = None) -> MachineInfo:
        """This machine: CPU count, Python version, plus the ``versions`` given."""
        return cls(
            cores=os.cpu_count() or 1,
            python=platform.python_version(),
            versions=dict(versions or {}),
        )


@dataclass(frozen=True)
class StepReport:
    """One executed step of a scenario."""

    name: str
    status: Status
    duration: float
    branch: Branch = Branch.TRY
    error: str | None = None


@dataclass(frozen=True)
class Attachment:
    """A named piece of text kept with a result (an object's YAML, a cluster's events)."""

    name: str
    text: str
    truncated: bool = False  # the full text is in the scenario's log directory


@dataclass(frozen=True)
class ExpectationResult:
    """One checked expectation, with what was expected and what was observed."""

    id: str  # stable, see expectation_id()
    kind: str  # events, reconciles, rejections, metric, latency, ...
    description: str
    expected: str
    actual: str
    passed: bool
    duration: float = 0.0  # seconds spent checking (polling until a deadline)
    details: str = ""
    """Multi-line text shown preformatted under the verdict: for ``assert``/``error`` the
    diff of the relevant subtree (expected vs actual), for ``script`` its output (truncated)."""
    attachments: tuple[Attachment, ...] = ()
    """Collected material, e.g. the selected objects' YAML of a failed ``assert``."""


@dataclass(frozen=True)
class TimelineEntry:
    """Something that happened at a point in time, seen from one cluster or manager."""

    at: float
    kind: TimelineKind
    source: str  # the cluster (mutations, faults) or manager (events) it happened at
    object: str  # e.g. "default/ConfigMap/cm-1" or "kyma-system/Kyma/kyma-a"
    detail: str = ""


class ProcessRecordLike(Protocol):
    """What :meth:`ProcessInfo.from_record` reads (``harness.clusters.process.ProcessRecord``)."""

    @property
    def name(self) -> str: ...
    @property
    def pid(self) -> int | None: ...
    @property
    def argv(self) -> tuple[str, ...]: ...
    @property
    def exit_code(self) -> int | None: ...
    @property
    def log_path(self) -> Path: ...


@dataclass(frozen=True)
class ProcessInfo:
    """An external process a scenario ran, and where its log is."""

    name: str
    pid: int | None
    argv: tuple[str, ...]
    exit_code: int | None  # None: still running when the report was built
    log_path: Path

    @classmethod
    def from_record(cls, record: ProcessRecordLike) -> ProcessInfo:
        return cls(**{f.name: getattr(record, f.name) for f in fields(cls)})


@dataclass(frozen=True)
class AttemptReport:
    """An earlier attempt of a scenario that did not pass and was run again (``--retries``):
    what a person needs to see why it failed; its process logs stay at their paths."""

    number: int  # 1 is the first attempt
    status: Status
    started_at: float
    duration: float
    error: str | None = None
    failed_steps: tuple[StepReport, ...] = ()
    failed_expectations: tuple[ExpectationResult, ...] = ()
    processes: tuple[ProcessInfo, ...] = ()
    timeline: tuple[TimelineEntry, ...] = ()
    """What happened in that attempt (reconciles, faults, steps): a flake's story is often
    in its timing, which the attempt that passed does not show."""

    @classmethod
    def of(cls, number: int, report: ScenarioReport) -> AttemptReport:
        """Attempt ``number``, from the report that attempt finished with."""
        return cls(
            number=number,
            status=report.status,
            started_at=report.started_at,
            duration=report.duration,
            error=report.error,
            failed_steps=tuple(
                s for s in report.steps if s.status in (Status.FAILED, Status.ERROR)
            ),
            failed_expectations=tuple(e for e in report.expectations if not e.passed),
            processes=report.processes,
            timeline=report.timeline,
        )


@dataclass(frozen=True)
class ScenarioReport:
    """Everything about one scenario of a run."""

    name: str
    file: str
    status: Status
    started_at: float
    duration: float
    error: str | None = None
    """Scenario-level error (setup failure, crash), not a failed check; for a skipped
    scenario, why it was skipped (the backend cannot run it, or it checked nothing)."""
    steps: tuple[StepReport, ...] = ()
    expectations: tuple[ExpectationResult, ...] = ()
    timeline: tuple[TimelineEntry, ...] = ()
    latencies_ms: tuple[float, ...] = ()
    processes: tuple[ProcessInfo, ...] = ()
    metrics: Mapping[str, float] = field(default_factory=dict)  # sample name → value, at end
    attempts: tuple[AttemptReport, ...] = ()
    """Earlier attempts that did not pass (``--retries``), oldest first; everything else
    in this report is the last attempt's. Passed after failed attempts: status flaky."""

    @property
    def ok(self) -> bool:
        """Passed, flaky (passed on a retry) or skipped: the run's exit code stays 0."""
        return self.status in (Status.PASSED, Status.FLAKY, Status.SKIPPED)

    @property
    def retry(self) -> int:
        """Which retry this report is (0: the first attempt); flaky: "passed on retry k"."""
        return len(self.attempts)

    @property
    def total_duration(self) -> float:
        """Seconds of every attempt together."""
        return self.duration + sum(a.duration for a in self.attempts)

    @property
    def steps_duration(self) -> float:
        """Seconds its steps took (the last attempt's)."""
        return sum(st.duration for st in self.steps)

    @property
    def environment_duration(self) -> float:
        """Seconds of the last attempt outside its steps: clusters, gateway, KLM and
        webhooks up, Kymas reconciled, observations taken, everything down again."""
        return max(0.0, self.duration - self.steps_duration)

    @property
    def status_text(self) -> str:
        """The status for people: ``flaky (passed on retry 1)``, ``failed (3 attempts)``."""
        if self.status is Status.FLAKY:
            return f"flaky (passed on retry {self.retry})"
        if self.attempts:
            return f"{self.status.value} ({self.retry + 1} attempts)"
        return self.status.value

    @property
    def expectations_passed(self) -> int:
        return sum(1 for e in self.expectations if e.passed)


@dataclass(frozen=True)
class RunReport:
    """One run of the harness: one or more scenarios on one machine."""

    run_id: str
    started_at: float
    finished_at: float
    machine: MachineInfo
    scenarios: tuple[ScenarioReport, ...] = ()

    @property
    def duration(self) -> float:
        return self.finished_at - self.started_at

    @property
    def ok(self) -> bool:
        """True when every scenario passed (perhaps on a retry: flaky) or was skipped: the
        run's exit code is 0."""
        return all(s.ok for s in self.scenarios)

    def count(self, status: Status) -> int:
        return sum(1 for s in self.scenarios if s.status is status)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: ``schema``, then the fields in order (enums as values, tuples as
        lists, paths as strings)."""
        return {"schema": SCHEMA_VERSION, **_RUN_REPORT.dump_python(self, mode="json")}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RunReport:
        schema = d.get("schema", SCHEMA_VERSION)
        if schema != SCHEMA_VERSION:
            raise ReportFormatError(
                f"report schema {schema!r} is not supported (this harness reads {SCHEMA_VERSION})"
            )
        try:
            return _RUN_REPORT.validate_python(d)
        except ValidationError as e:
            fields = (f"{'.'.join(map(str, x['loc']))}: {x['msg']}" for x in e.errors())
            raise ReportFormatError(f"report field {'; '.join(fields)}") from None

    def to_json(self, *, indent: int | None = 2) -> str:
        """JSON text; NaN and infinities are refused, as JSON has no spelling for them
        (pydantic's own ``dump_json`` would write them as ``null``)."""
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False, ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> RunReport:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise ReportFormatError(f"report is not valid JSON: {e}") from e
        if not isinstance(data, dict):
            raise ReportFormatError("report JSON must be an object")
        return cls.from_dict(data)


_RUN_REPORT = TypeAdapter(RunReport)
