"""Operations: what a step does. Each is a mapping with exactly one key, like chainsaw's.

The bodies of ``fault`` are in :mod:`~harness.scenario.fault_ops`, of ``assert``, ``error``
and ``collect`` in :mod:`~harness.scenario.selections`."""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from pydantic import Discriminator, Field, Tag, model_validator

from harness.matching.output import regex_problem
from harness.matching.syntax import check_expressions
from harness.scenario.expectations import Expect
from harness.scenario.fault_ops import AnyFault
from harness.scenario.requests import Request
from harness.scenario.selections import Assert, Capture, Collect, capture_problem
from harness.scenario.values import (
    RESOURCE_SCHEMA_EXTRA,
    DnsLabel,
    Labels,
    Model,
    PositiveDuration,
    Resource,
    Text,
)
from harness.scenario.watchers import WatcherDef

# churn: seeded random writes on SKRs, recorded as ground truth (harness.churn runs them) ---


class ChurnMix(Model):
    """Relative weights of the mutation kinds (need not add up to anything)."""

    create: float = Field(default=1.0, ge=0)
    spec_update: float = Field(default=3.0, ge=0)
    status_update: float = Field(default=1.0, ge=0)
    label_flip: float = Field(default=1.0, ge=0)
    delete: float = Field(default=1.0, ge=0)

    @model_validator(mode="after")
    def _some_weight(self) -> ChurnMix:
        if not any((self.create, self.spec_update, self.status_update, self.label_flip)):
            raise ValueError("mix needs a positive weight besides delete")
        return self


class Churn(Model):
    """Seeded random writes on SKRs; every write is recorded as ground truth.

    ``objects`` is the pool size per cluster and kind, ``rate`` writes per second per
    cluster, ``labels`` are put on every created object. ``background: true`` lets the
    step go on at once; later ``truth`` and ``latency`` expectations wait for it to end.
    """

    clusters: tuple[DnsLabel, ...] = Field(min_length=1)
    kinds: tuple[Literal["kymas", "configmaps", "secrets"], ...] = ("configmaps",)
    mix: ChurnMix = Field(default_factory=ChurnMix)
    objects: int = Field(default=10, ge=1, le=10_000)
    rate: float = Field(default=10.0, gt=0, le=10_000)
    duration: PositiveDuration = 10.0
    seed: int = 0
    labels: Labels = Field(default_factory=dict)
    background: bool = False


# Objects, watchers, scripts ------------------------------------------------------------------


class Apply(Model):
    """Create or replace ``object`` (inline) or the objects in ``file`` (relative to the
    scenario file) on ``cluster``."""

    cluster: DnsLabel
    object: dict[str, Any] | None = None
    file: Text | None = None

    @model_validator(mode="after")
    def _one_source(self) -> Apply:
        if (self.object is None) == (self.file is None):
            raise ValueError("apply needs exactly one of object or file")
        if self.object is not None:
            missing = [k for k in ("apiVersion", "kind") if not self.object.get(k)]
            meta = self.object.get("metadata")
            if not isinstance(meta, dict) or not meta.get("name"):
                missing.append("metadata.name")
            if missing:
                raise ValueError(f"object lacks {', '.join(missing)}")
        return self


class _OneObject(Model):
    # no docstring: it would become Delete's description in the schema
    cluster: DnsLabel
    resource: Resource = Field(json_schema_extra=RESOURCE_SCHEMA_EXTRA)
    namespace: str = ""
    name: Text


class Delete(_OneObject):
    pass


class Patch(_OneObject):
    """A JSON merge patch (``patch``) of one object, or of its ``status`` subresource."""

    patch: dict[str, Any]
    subresource: Literal["status"] | None = None


class WatcherChange(Model):
    """``apply: <watcher>`` adds or replaces a Watcher, ``delete: <name>`` removes one."""

    apply: WatcherDef | None = None
    delete: DnsLabel | None = None

    @model_validator(mode="after")
    def _one(self) -> WatcherChange:
        if (self.apply is None) == (self.delete is None):
            raise ValueError("watcher needs exactly one of apply or delete")
        return self


class OutputCheck(Model):
    """What a command's stdout or stderr must hold: each of ``contains``, none of
    ``notContains``, a ``regex`` match (multi-line), and/or a ``json`` partial tree (the
    output parsed as JSON, matched like ``assert``'s ``match``)."""

    contains: tuple[str, ...] = ()
    not_contains: tuple[str, ...] = ()
    regex: str | None = None
    json_: Any = Field(default=None, alias="json")

    @model_validator(mode="after")
    def _valid(self) -> OutputCheck:

        if self.regex is not None and (problem := regex_problem(self.regex)) is not None:
            raise ValueError(f"regex: {problem}")
        problems = check_expressions(self.json_) if self.json_ is not None else []
        if problems:
            raise ValueError(f"json: {problems[0][1]}")
        return self


class ScriptExpect(Model):
    exit_code: int = Field(default=0, ge=0, le=255)
    stdout: OutputCheck | None = None
    stderr: OutputCheck | None = None


DEFAULT_SCRIPT_INTERVAL = 1.0


class Script(Model):
    """Run ``command`` (an argv list, or a string for ``/bin/sh -c``) with ``env`` added to
    the harness's environment plus ``KUBECONFIG_<CLUSTER>`` (e.g. ``KUBECONFIG_SKR_A``) per
    cluster; killed after ``timeout``. ``expect``: the exit code (default 0) and checks on
    stdout/stderr. With ``within``, the command runs again every ``interval`` until
    ``expect`` holds or ``within`` has passed (a poll without a hand-written loop).
    ``capture`` keeps values of the JSON stdout (JMESPath) as bindings. The (last run's)
    output goes into the report (truncated; full in the logs)."""

    command: tuple[str, ...] | str
    timeout: PositiveDuration = 30.0
    env: dict[str, str] = Field(default_factory=dict)
    expect: ScriptExpect = Field(default_factory=ScriptExpect)
    within: PositiveDuration | None = None
    interval: PositiveDuration = DEFAULT_SCRIPT_INTERVAL
    capture: Capture = Field(default_factory=dict)

    @model_validator(mode="after")
    def _command(self) -> Script:
        empty = not self.command if isinstance(self.command, tuple) else not self.command.strip()
        if empty:
            raise ValueError("command must not be empty")
        if (problem := capture_problem(self.capture)) is not None:
            raise ValueError(problem)
        if "interval" in self.model_fields_set and self.within is None:
            raise ValueError("interval is for polling: give within too")
        return self


# One wrapper per operation key --------------------------------------------------------------


class ApplyOp(Model):
    apply: Apply


class PatchOp(Model):
    patch: Patch


class DeleteOp(Model):
    delete: Delete


class ChurnOp(Model):
    churn: Churn


class FaultOp(Model):
    fault: AnyFault


class WaitOp(Model):
    wait: PositiveDuration


class ExpectOp(Model):
    expect: Expect


class WatcherOp(Model):
    watcher: WatcherChange


class RequestOp(Model):
    request: Request


class AssertOp(Model):
    assert_: Assert = Field(alias="assert")


class ErrorOp(Model):
    error: Assert

    @model_validator(mode="after")
    def _no_count_or_capture(self) -> ErrorOp:
        if self.error.count is not None:
            raise ValueError("error holds when no object matches; count is for assert")
        if self.error.capture:
            raise ValueError("error matches no object, so it has nothing to capture")
        return self


class ScriptOp(Model):
    script: Script


class CollectOp(Model):
    collect: Collect


class SetOp(Model):
    """``set: {name: value}``: give names values for the rest of the run (``${{ name }}``),
    with the run's bindings and captured values filled in — e.g. a value made of several
    captured ones. Values keep their YAML type."""

    set_: dict[str, Any] = Field(alias="set", min_length=1)


def operation_key(value: Any) -> str | None:
    """The operation's key, or ``None`` unless it is a mapping with exactly one key."""
    if isinstance(value, dict):
        return next(iter(value)) if len(value) == 1 else None
    for key, cls in OPERATIONS.items():
        if isinstance(value, cls):
            return key
    return None


Operation = Annotated[
    Annotated[ApplyOp, Tag("apply")]
    | Annotated[PatchOp, Tag("patch")]
    | Annotated[DeleteOp, Tag("delete")]
    | Annotated[ChurnOp, Tag("churn")]
    | Annotated[FaultOp, Tag("fault")]
    | Annotated[WaitOp, Tag("wait")]
    | Annotated[ExpectOp, Tag("expect")]
    | Annotated[WatcherOp, Tag("watcher")]
    | Annotated[RequestOp, Tag("request")]
    | Annotated[AssertOp, Tag("assert")]
    | Annotated[ErrorOp, Tag("error")]
    | Annotated[ScriptOp, Tag("script")]
    | Annotated[CollectOp, Tag("collect")]
    | Annotated[SetOp, Tag("set")],
    Discriminator(operation_key),
]
# The operation keys, read off Operation's tags so that the two cannot disagree.
OPERATIONS: dict[str, type[Model]] = {
    tag.tag: cls for cls, tag in map(get_args, get_args(get_args(Operation)[0]))
}
