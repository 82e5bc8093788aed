"""The run report: what happened in a run, as plain frozen data with a JSON form.

The runner fills a :class:`~harness.report.builder.ReportBuilder` while scenarios run;
``build()`` turns it into a :class:`RunReport`, which the writers (``junit``, ``html``,
``writer``) render. Times are wall-clock seconds since the epoch (``time.time()``);
durations are seconds; latencies are milliseconds. ``to_dict`` / ``from_dict`` give a
JSON-safe form that round-trips exactly.
"""

from __future__ import annotations

import json
import os
import platform
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol, TypeVar

from harness.report.errors import ReportFormatError

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

    def to_dict(self) -> dict[str, Any]:
        return {"cores": self.cores, "python": self.python, "versions": dict(self.versions)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> MachineInfo:
        return cls(
            cores=_get(d, "cores", int),
            python=_get(d, "python", str),
            versions={str(k): str(v) for k, v in _get(d, "versions", dict).items()},
        )


@dataclass(frozen=True)
class StepReport:
    """One executed step of a scenario."""

    name: str
    status: Status
    duration: float
    branch: Branch = Branch.TRY
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status.value,
            "duration": self.duration,
            "branch": self.branch.value,
            "error": self.error,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> StepReport:
        return cls(
            name=_get(d, "name", str),
            status=_enum(d, "status", Status),
            duration=_get(d, "duration", float),
            branch=_enum(d, "branch", Branch),
            error=_opt(d, "error", str),
        )


@dataclass(frozen=True)
class Attachment:
    """A named piece of text kept with a result (an object's YAML, a cluster's events)."""

    name: str
    text: str
    truncated: bool = False  # the full text is in the scenario's log directory

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "text": self.text, "truncated": self.truncated}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Attachment:
        return cls(
            name=_get(d, "name", str),
            text=_get(d, "text", str),
            truncated=_get(d, "truncated", bool, False),
        )


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

    def __post_init__(self) -> None:
        object.__setattr__(self, "attachments", tuple(self.attachments))

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "description": self.description,
            "expected": self.expected,
            "actual": self.actual,
            "passed": self.passed,
            "duration": self.duration,
            "details": self.details,
            "attachments": [a.to_dict() for a in self.attachments],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ExpectationResult:
        return cls(
            id=_get(d, "id", str),
            kind=_get(d, "kind", str),
            description=_get(d, "description", str),
            expected=_get(d, "expected", str),
            actual=_get(d, "actual", str),
            passed=_get(d, "passed", bool),
            duration=_get(d, "duration", float, 0.0),
            details=_get(d, "details", str, ""),
            attachments=tuple(Attachment.from_dict(a) for a in _get(d, "attachments", list, [])),
        )


@dataclass(frozen=True)
class TimelineEntry:
    """Something that happened at a point in time, seen from one cluster or manager."""

    at: float
    kind: TimelineKind
    source: str  # the cluster (mutations, faults) or manager (events) it happened at
    object: str  # e.g. "default/ConfigMap/cm-1" or "kyma-system/Kyma/kyma-a"
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "at": self.at,
            "kind": self.kind.value,
            "source": self.source,
            "object": self.object,
            "detail": self.detail,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> TimelineEntry:
        return cls(
            at=_get(d, "at", float),
            kind=_enum(d, "kind", TimelineKind),
            source=_get(d, "source", str),
            object=_get(d, "object", str),
            detail=_get(d, "detail", str, ""),
        )


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

    def __post_init__(self) -> None:
        object.__setattr__(self, "argv", tuple(self.argv))
        object.__setattr__(self, "log_path", Path(self.log_path))

    @classmethod
    def from_record(cls, record: ProcessRecordLike) -> ProcessInfo:
        return cls(
            name=record.name,
            pid=record.pid,
            argv=tuple(record.argv),
            exit_code=record.exit_code,
            log_path=record.log_path,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "pid": self.pid,
            "argv": list(self.argv),
            "exit_code": self.exit_code,
            "log_path": str(self.log_path),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ProcessInfo:
        return cls(
            name=_get(d, "name", str),
            pid=_opt(d, "pid", int),
            argv=tuple(str(a) for a in _get(d, "argv", list)),
            exit_code=_opt(d, "exit_code", int),
            log_path=Path(_get(d, "log_path", str)),
        )


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

    def __post_init__(self) -> None:
        for name in ("failed_steps", "failed_expectations", "processes", "timeline"):
            object.__setattr__(self, name, tuple(getattr(self, name)))

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

    def to_dict(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "status": self.status.value,
            "started_at": self.started_at,
            "duration": self.duration,
            "error": self.error,
            "failed_steps": [s.to_dict() for s in self.failed_steps],
            "failed_expectations": [e.to_dict() for e in self.failed_expectations],
            "processes": [p.to_dict() for p in self.processes],
            "timeline": [t.to_dict() for t in self.timeline],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> AttemptReport:
        return cls(
            number=_get(d, "number", int),
            status=_enum(d, "status", Status),
            started_at=_get(d, "started_at", float),
            duration=_get(d, "duration", float),
            error=_opt(d, "error", str),
            failed_steps=tuple(StepReport.from_dict(s) for s in _get(d, "failed_steps", list, [])),
            failed_expectations=tuple(
                ExpectationResult.from_dict(e) for e in _get(d, "failed_expectations", list, [])
            ),
            processes=tuple(ProcessInfo.from_dict(p) for p in _get(d, "processes", list, [])),
            timeline=tuple(TimelineEntry.from_dict(t) for t in _get(d, "timeline", list, [])),
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

    def __post_init__(self) -> None:
        for name in (
            "steps",
            "expectations",
            "timeline",
            "latencies_ms",
            "processes",
            "attempts",
        ):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        object.__setattr__(self, "metrics", dict(self.metrics))

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

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "file": self.file,
            "status": self.status.value,
            "started_at": self.started_at,
            "duration": self.duration,
            "error": self.error,
            "steps": [s.to_dict() for s in self.steps],
            "expectations": [e.to_dict() for e in self.expectations],
            "timeline": [t.to_dict() for t in self.timeline],
            "latencies_ms": list(self.latencies_ms),
            "processes": [p.to_dict() for p in self.processes],
            "metrics": dict(self.metrics),
            "attempts": [a.to_dict() for a in self.attempts],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ScenarioReport:
        return cls(
            name=_get(d, "name", str),
            file=_get(d, "file", str),
            status=_enum(d, "status", Status),
            started_at=_get(d, "started_at", float),
            duration=_get(d, "duration", float),
            error=_opt(d, "error", str),
            steps=tuple(StepReport.from_dict(s) for s in _get(d, "steps", list, [])),
            expectations=tuple(
                ExpectationResult.from_dict(e) for e in _get(d, "expectations", list, [])
            ),
            timeline=tuple(TimelineEntry.from_dict(t) for t in _get(d, "timeline", list, [])),
            latencies_ms=tuple(float(v) for v in _get(d, "latencies_ms", list, [])),
            processes=tuple(ProcessInfo.from_dict(p) for p in _get(d, "processes", list, [])),
            metrics={str(k): float(v) for k, v in _get(d, "metrics", dict, {}).items()},
            attempts=tuple(AttemptReport.from_dict(a) for a in _get(d, "attempts", list, [])),
        )


@dataclass(frozen=True)
class RunReport:
    """One run of the harness: one or more scenarios on one machine."""

    run_id: str
    started_at: float
    finished_at: float
    machine: MachineInfo
    scenarios: tuple[ScenarioReport, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "scenarios", tuple(self.scenarios))

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
        return {
            "schema": SCHEMA_VERSION,
            "run_id": self.run_id,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "machine": self.machine.to_dict(),
            "scenarios": [s.to_dict() for s in self.scenarios],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RunReport:
        schema = d.get("schema", SCHEMA_VERSION)
        if schema != SCHEMA_VERSION:
            raise ReportFormatError(
                f"report schema {schema!r} is not supported (this harness reads {SCHEMA_VERSION})"
            )
        return cls(
            run_id=_get(d, "run_id", str),
            started_at=_get(d, "started_at", float),
            finished_at=_get(d, "finished_at", float),
            machine=MachineInfo.from_dict(_get(d, "machine", dict)),
            scenarios=tuple(ScenarioReport.from_dict(s) for s in _get(d, "scenarios", list)),
        )

    def to_json(self, *, indent: int | None = 2) -> str:
        """JSON text; NaN and infinities are refused, as JSON has no spelling for them."""
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


# -- strict field access for from_dict ----------------------------------------------------

_MISSING: Any = object()
_E = TypeVar("_E", bound=StrEnum)


def _get(d: Mapping[str, Any], key: str, typ: type[Any], default: Any = _MISSING) -> Any:
    if key not in d:
        if default is _MISSING:
            raise ReportFormatError(f"report field {key!r} is missing")
        return default
    value = d[key]
    if typ is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, typ) or (typ is int and isinstance(value, bool)):
        raise ReportFormatError(
            f"report field {key!r} must be {typ.__name__}, not {type(value).__name__}"
        )
    return value


def _opt(d: Mapping[str, Any], key: str, typ: type[Any]) -> Any:
    return None if d.get(key) is None else _get(d, key, typ)


def _enum(d: Mapping[str, Any], key: str, typ: type[_E]) -> _E:
    value = _get(d, key, str)
    try:
        return typ(value)
    except ValueError:
        allowed = ", ".join(m.value for m in typ)
        raise ReportFormatError(f"report field {key!r} is {value!r}; one of: {allowed}") from None
