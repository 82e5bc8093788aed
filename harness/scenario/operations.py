"""Operations: what a step does. Each is a mapping with exactly one key, like chainsaw's."""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from pydantic import Discriminator, Field, Tag, model_validator

from harness import faults
from harness.faults import BreakLeaves, DropOldCa, Fault, PartFault, RotateCa, RotateLeaves
from harness.matching.output import regex_problem
from harness.matching.syntax import check_expressions, expression_problem
from harness.scenario.clusters import CertificateKind
from harness.scenario.expectations import Count, Expect
from harness.scenario.objects import ObjectType, match_problem
from harness.scenario.requests import Request
from harness.scenario.values import (
    RESOURCE_SCHEMA_EXTRA,
    DnsLabel,
    Duration,
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


# fault ------------------------------------------------------------------------------------
# Its YAML forms: stop/start/kill/restart a part, Envoy's fault filter on the KCP routes, a
# certificate rotation or a broken certificate; each builds the typed harness.faults.Fault
# the environment carries out (``.fault``), so a bad target is a located error at load time.


FAULT_TARGET_PATTERN = r"^(gateway|(listener|webhook|apiserver)/[a-z0-9]([-a-z0-9]*[a-z0-9])?)$"


class ProcessFault(Model):
    """Stop, start, kill (SIGKILL) or restart a process: ``gateway``,
    ``listener/<component>``, ``webhook/<skr>`` or ``apiserver/<cluster>``."""

    action: Literal["stop", "start", "kill", "restart"]
    target: str = Field(pattern=FAULT_TARGET_PATTERN)

    @model_validator(mode="after")
    def _fits_target(self) -> ProcessFault:
        self.fault  # noqa: B018 - raises FaultError (a ValueError) for e.g. "kill listener/x"
        return self

    @property
    def fault(self) -> PartFault:
        """The typed fault the environment carries out."""
        return PartFault.parse(self.target, self.action)


class KcpFaultSpec(Model):
    """Envoy's fault-injection filter on every KCP route: ``delay`` each request,
    abort ``abortPercent`` % of them with ``abortStatus``."""

    delay: Duration | None = None
    abort_percent: float = Field(default=0.0, ge=0, le=100)
    abort_status: int = Field(default=503, ge=200, le=599)


class KcpFault(Model):
    """``kcp: {...}`` sets the KCP fault; ``kcp: null`` clears it."""

    kcp: KcpFaultSpec | None

    @property
    def fault(self) -> faults.KcpFault:
        if self.kcp is None:
            return faults.KcpFault(None)
        spec = self.kcp
        return faults.KcpFault(
            faults.kcp_injection(
                delay=spec.delay or 0.0,
                abort_percent=spec.abort_percent,
                abort_status=spec.abort_status,
            )
        )


class RotateFault(Model):
    """Rotate the SKRs' leaf certificates (``clusters`` empty = every SKR) or the KCP CA
    (new CA prepended to the trusted bundles, every leaf re-issued), or drop the old CA
    from every bundle after a CA rotation (``drop-old-ca``)."""

    rotate: Literal["leaf", "ca", "drop-old-ca"]
    clusters: tuple[DnsLabel, ...] = ()

    @model_validator(mode="after")
    def _clusters_only_for_leaf(self) -> RotateFault:
        if self.clusters and self.rotate != "leaf":
            raise ValueError(f"rotate: {self.rotate} covers every SKR; clusters is for leaf only")
        return self

    @property
    def fault(self) -> Fault:
        """The typed fault the environment carries out."""
        if self.rotate == "leaf":
            return RotateLeaves(tuple(self.clusters))
        return RotateCa() if self.rotate == "ca" else DropOldCa()


class BreakFault(Model):
    """Issue the chosen SKRs' runtime certificates broken on purpose (``certificate``:
    ``expired``, ``not-yet-valid``, ``foreign-ca``, ``wrong-san``, ``empty-cn``), or
    ``keep`` the current ones (KLM stops renewing them, as when it cannot reach the SKR:
    a CA rotation then leaves them behind); either lasts until a ``rotate: leaf`` of those
    SKRs puts a correct certificate back."""

    certificate: CertificateKind | Literal["keep"]
    clusters: tuple[DnsLabel, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _broken(self) -> BreakFault:
        if self.certificate == CertificateKind.NONE:
            raise ValueError("certificate: none breaks nothing; use rotate: leaf to repair")
        return self

    @property
    def fault(self) -> BreakLeaves:
        return BreakLeaves(tuple(self.clusters), str(self.certificate))


def _fault_tag(value: Any) -> str | None:
    if isinstance(value, dict):
        for key, tag in (("kcp", "kcp"), ("rotate", "rotate"), ("certificate", "break")):
            if key in value:
                return tag
        if "action" in value or "target" in value:
            return "process"
        return None
    tags = {cls: tag.tag for cls, tag in map(get_args, get_args(get_args(AnyFault)[0]))}
    return tags.get(type(value))


AnyFault = Annotated[
    Annotated[ProcessFault, Tag("process")]
    | Annotated[KcpFault, Tag("kcp")]
    | Annotated[RotateFault, Tag("rotate")]
    | Annotated[BreakFault, Tag("break")],
    Discriminator(_fault_tag),
]


# Objects, selections, scripts ----------------------------------------------------------------


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


SELECTION_CLUSTER_PATTERN = r"^(\*|[a-z0-9]([-a-z0-9]*[a-z0-9])?)$"
EVERY_SKR = "*"
"""``cluster: "*"`` selects on every SKR: an ``assert`` must hold on each."""


class _Selecting(ObjectType):
    """The fields that pick objects (see :class:`Selection`), shared with ``collect``."""

    cluster: str = Field(pattern=SELECTION_CLUSTER_PATTERN)


class Selection(_Selecting):
    """Which objects: on ``cluster`` (a cluster name, or ``"*"`` for every SKR), of
    ``resource`` (a shorthand or ``{group, version, resource}``) or ``apiVersion`` +
    ``kind`` (looked up with the API server's discovery), in ``namespace`` (empty: every
    namespace, or a cluster-scoped kind), by ``name`` and/or label ``selector``."""

    @model_validator(mode="after")
    def _one_type(self) -> Selection:
        problem = self.type_problem(required=True)
        if problem is not None:
            raise ValueError(problem)
        return self

    def describe(self) -> str:
        cluster = "every SKR" if self.cluster == EVERY_SKR else self.cluster
        return f"{self.describe_objects()} on {cluster}"


def capture_problem(capture: dict[str, str]) -> str | None:
    """Why a ``capture`` mapping (name → JMESPath) is invalid, or ``None``."""
    for name, expression in capture.items():
        if not expression.strip():
            return f"capture.{name}: the expression is empty"
        problem = expression_problem(f"({expression})")
        if problem is not None:
            return f"capture.{name}: {problem}"
    return None


Capture = dict[str, str]
"""``capture: {name: expression}``: each name gets the JMESPath ``expression``'s value
(over the matching object, or a command's JSON output) for the rest of the run, as
``${{ name }}``."""


class Assert(Selection):
    """``assert``: poll until a selected object matches ``match`` (a partial object tree:
    maps as subsets, scalars equal, lists item by item; ``$anyOrder`` / ``$contains`` /
    ``$oneOf`` forms; ``(jmespath)`` keys compute a value) on the cluster — on each SKR
    for ``cluster: "*"`` — or ``within`` ends. ``count`` asks how many selected objects
    match (on each cluster), instead of at least one. ``capture`` keeps values of the
    (first) matching object as bindings for later operations. As ``error``: holds when
    no selected object matches (also when none exists). ``match: {}`` only asks that one
    exists."""

    match: dict[str, Any] = Field(default_factory=dict)
    within: PositiveDuration = 10.0
    count: Count | None = None
    capture: Capture = Field(default_factory=dict)

    @model_validator(mode="after")
    def _expressions(self) -> Assert:
        if (problem := match_problem(self.match)) is not None:
            raise ValueError(problem)
        if (capture := capture_problem(self.capture)) is not None:
            raise ValueError(capture)
        if self.capture and self.cluster == EVERY_SKR:
            raise ValueError(
                'capture needs one cluster, not "*": each SKR would give its own value'
            )
        if self.capture and self.bounds[1] == 0:
            raise ValueError("capture needs a matching object; this count allows none")
        return self

    @property
    def bounds(self) -> tuple[int, int | None]:
        """(at least, at most or ``None``) matching objects per cluster."""
        return Count.bounds_of(self.count)


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


class Collect(_Selecting):
    """Put material into the report (usable in ``catch``/``finally``): the selected
    objects' YAML (``resource`` or ``apiVersion`` + ``kind``, ``namespace``, ``name``,
    ``selector``) and/or the cluster's Kubernetes ``events`` (of ``namespace``, or all)."""

    events: bool = False

    @model_validator(mode="after")
    def _something(self) -> Collect:
        problem = self.type_problem(required=False)
        if problem is not None:
            raise ValueError(problem)
        if self.resource is None and not self.typed and not self.events:
            raise ValueError(
                "collect needs objects (resource, or apiVersion + kind), events: true, or both"
            )
        return self

    def selection(self) -> Selection | None:
        if self.resource is None and self.kind is None:
            return None
        return Selection(**{name: getattr(self, name) for name in _Selecting.model_fields})


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
