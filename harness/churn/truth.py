"""Ground truth: which manager must receive which WatchEvent for the writes a churn made.

Pure. The oracle models only the API server's routing (resource, ``objectSelector``,
webhook activity, failed writes by ``WriteFailure``) and the coalescing bounds, as
docs/ground-truth.md lays out; the webhook's decision is ``watcher.decide.decide`` itself,
called on a synthesized AdmissionReview, so the oracle cannot drift from the product's rules.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from dataclasses import field as dc_field
from typing import Any, Literal

from harness.churn.model import (
    ExecutedMutation,
    KindInfo,
    Mutation,
    ObjectId,
    WriteFailure,
    apply_merge_patch,
    frozen_map,
)
from watcher.decide import Reason, decide
from watcher.model import GroupVersionKind
from watcher.render.watcher_cr import Watcher

Field = Literal["spec", "status"]


@dataclass(frozen=True)
class Rule:
    """One Watcher's webhook as the API server sees it.

    ``since``/``until``: the Watcher exists from/until these times (runner clock; ``None``
    = for the whole churn).
    """

    manager: str
    group: str
    version: str
    resource: str
    field: Field = "spec"
    labels: Mapping[str, str] = dc_field(default_factory=frozen_map, hash=False)
    name: str = ""
    since: float | None = None
    until: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "labels", frozen_map(self.labels))

    @classmethod
    def from_watcher(
        cls, watcher: Watcher, *, since: float | None = None, until: float | None = None
    ) -> Rule:
        watch = watcher.spec.resource_to_watch
        return cls(
            manager=watcher.manager,
            group=watch.group,
            version=watch.version,
            resource=watch.resource,
            field=watcher.spec.field,
            labels=watcher.spec.labels_to_watch,
            name=watcher.route_name,
            since=since,
            until=until,
        )

    def routes(
        self, mutation: Mutation, before: Mapping[str, str], after: Mapping[str, str]
    ) -> bool:
        """Whether the API server calls this webhook for ``mutation`` (labels from the write)."""
        if not self.handles(mutation):
            return False
        if mutation.operation == "create":
            return self.selects(after)
        if mutation.operation == "delete":
            return self.selects(before)
        return self.selects(before) or self.selects(after)

    def handles(self, mutation: Mutation) -> bool:
        """Whether the rule covers ``mutation``'s resource and operation (labels aside)."""
        kind = mutation.kind
        if not all(
            mine in ("*", theirs)
            for mine, theirs in (
                (self.group, kind.group),
                (self.version, kind.version),
                (self.resource, kind.resource),
            )
        ):
            return False
        return (self.field == "status") == (mutation.operation == "status-update")

    def selects(self, labels: Mapping[str, str]) -> bool:
        return all(labels.get(k) == v for k, v in self.labels.items())

    def activity(
        self, sent_at: float, acked_at: float, settle: float
    ) -> Literal["active", "inactive", "uncertain"]:
        """Whether the webhook was surely on, surely off, or maybe on during the write."""
        if self.since is not None:
            if acked_at < self.since:
                return "inactive"
            if sent_at < self.since + settle:
                return "uncertain"
        if self.until is not None:
            if sent_at >= self.until + settle:
                return "inactive"
            if acked_at >= self.until:
                return "uncertain"
        return "active"

    def describe(self) -> str:
        selector = ",".join(f"{k}={v}" for k, v in sorted(self.labels.items())) or "(all)"
        group = self.group or "core"
        return (
            f"{self.name or self.manager}: {group}/{self.version}/{self.resource} "
            f"field={self.field} labels={selector} → {self.manager}"
        )


def rules_from_watchers(watchers: Iterable[Watcher]) -> tuple[Rule, ...]:
    """One rule per Watcher, in order (as KLM renders the webhooks)."""
    return tuple(Rule.from_watcher(w) for w in watchers)


@dataclass(frozen=True, order=True)
class EventKey:
    """Who must get an event about what: (manager, runtime id, object)."""

    manager: str
    runtime_id: str
    namespace: str
    name: str
    group: str
    kind: str

    @property
    def object(self) -> tuple[str, str, str, str]:
        return (self.namespace, self.name, self.group, self.kind)

    def describe_object(self) -> str:
        return f"{self.namespace}/{self.name} ({self.kind}{'.' + self.group if self.group else ''})"

    def __str__(self) -> str:
        return f"manager={self.manager} runtime={self.runtime_id} object={self.describe_object()}"


@dataclass(frozen=True)
class Cause:
    """One (write, webhook) pair that must (or may) produce an event."""

    mutation_id: int
    rule: str
    sent_at: float
    acked_at: float


@dataclass(frozen=True)
class ExpectedEvent:
    """The truth for one (manager, runtime, object): ``required`` = k, see docs/ground-truth.md."""

    key: EventKey
    cluster: str
    gvk: GroupVersionKind
    causes: tuple[Cause, ...] = ()
    optional_causes: tuple[Cause, ...] = ()

    @property
    def manager(self) -> str:
        return self.key.manager

    @property
    def runtime_id(self) -> str:
        return self.key.runtime_id

    @property
    def required(self) -> int:
        return len(self.causes)

    @property
    def optional(self) -> int:
        return len(self.optional_causes)

    @property
    def caused_by(self) -> tuple[int, ...]:
        return tuple(sorted({c.mutation_id for c in self.causes}))

    @property
    def last_cause(self) -> Cause | None:
        return max(self.causes, key=lambda c: (c.sent_at, c.mutation_id), default=None)

    @property
    def last_cause_at(self) -> float | None:
        """When the last required cause was acknowledged."""
        last = self.last_cause
        return None if last is None else last.acked_at

    @property
    def bounds(self) -> tuple[int, int]:
        """(least, most) events allowed."""
        return (1 if self.required else 0, self.required + self.optional)


@dataclass(frozen=True)
class Delivery:
    """One write at one webhook and what the webhook decided (for timelines and reports)."""

    mutation_id: int
    rule: str
    manager: str
    send: bool
    reason: Reason
    certainty: Literal["active", "uncertain"]


@dataclass(frozen=True)
class Truth:
    expected: tuple[ExpectedEvent, ...]
    deliveries: tuple[Delivery, ...]
    objects: frozenset[tuple[str, str, str, str, str]]
    """(runtime id, namespace, name, group, kind) of every object the churn wrote."""

    def for_manager(self, manager: str) -> tuple[ExpectedEvent, ...]:
        return tuple(e for e in self.expected if e.manager == manager)


def ground_truth(
    executed: Iterable[ExecutedMutation],
    rules: Sequence[Rule],
    runtime_ids: Mapping[str, str],
    *,
    settle: float = 0.0,
) -> Truth:
    """The expected events for ``executed`` writes (any order; replayed by ``sent_at``).

    ``runtime_ids`` maps a cluster name to its runtime id; unknown clusters raise KeyError
    naming them.
    """
    done = sorted((e for e in executed if _reached_admission(e)), key=lambda e: (e.sent_at, e.id))
    missing = sorted({e.mutation.cluster for e in done} - set(runtime_ids))
    if missing:
        raise KeyError(f"no runtime id for clusters {missing}")
    states: dict[ObjectId, Any] = {}
    unknown_state: set[ObjectId] = set()
    groups: dict[EventKey, tuple[str, GroupVersionKind, list[Cause], list[Cause]]] = {}
    deliveries: list[Delivery] = []
    objects: set[tuple[str, str, str, str, str]] = set()
    for ex in done:
        m = ex.mutation
        runtime = runtime_ids[m.cluster]
        objects.add((runtime, m.namespace, m.name, m.kind.group, m.kind.kind))
        # After a write of unknown effect the replayed state may be wrong, so every later
        # write to the object may or may not cause an event (labels and decision unknown).
        guessing = m.object_id in unknown_state
        if ex.failure is WriteFailure.UNKNOWN:
            unknown_state.add(m.object_id)
        old = states.get(m.object_id)
        new = _apply(old, m)
        if ex.ok:
            if new is None:
                states.pop(m.object_id, None)
            else:
                states[m.object_id] = new
        review = admission_review(m, old, new)
        for delivery in _deliveries(ex, review, rules, guessing, settle):
            deliveries.append(delivery)
            if not delivery.send:
                continue
            gvk = m.kind.gvk
            key = EventKey(delivery.manager, runtime, m.namespace, m.name, gvk.group, gvk.kind)
            entry = groups.setdefault(key, (m.cluster, gvk, [], []))
            cause = Cause(m.id, delivery.rule, ex.sent_at, ex.acked_at)
            (entry[2] if delivery.certainty == "active" else entry[3]).append(cause)
    expected = tuple(
        ExpectedEvent(key, cluster, gvk, tuple(req), tuple(opt))
        for key, (cluster, gvk, req, opt) in sorted(groups.items())
    )
    return Truth(expected, tuple(deliveries), frozenset(objects))


def _deliveries(
    ex: ExecutedMutation,
    review: dict[str, Any],
    rules: Sequence[Rule],
    guessing: bool,
    settle: float,
) -> Iterator[Delivery]:
    """``ex`` at each webhook it reaches while active, and what that webhook decides;
    ``guessing``: the object's state is unknown, so every rule that covers it may send."""
    m = ex.mutation
    after = ex.labels_after if ex.ok else m.labels_after  # what the request carried
    for rule in rules:
        if not (rule.handles(m) if guessing else rule.routes(m, ex.labels_before, after)):
            continue
        certainty = rule.activity(ex.sent_at, ex.acked_at, settle)
        if certainty == "inactive":
            continue
        decision = decide(review, manager=rule.manager)
        certainty = "uncertain" if guessing or not ex.ok else certainty
        label = rule.name or rule.manager
        send = decision.send or guessing
        yield Delivery(m.id, label, rule.manager, send, decision.reason, certainty)


def _reached_admission(ex: ExecutedMutation) -> bool:
    """Accepted, or failed after (maybe) reaching the webhooks (``WriteFailure``)."""
    return ex.ok or ex.failure in (WriteFailure.ADMITTED, WriteFailure.UNKNOWN)


def _apply(old: Any, m: Mutation) -> Any:
    if m.operation == "delete":
        return None
    if m.operation == "create":
        return m.payload()
    return apply_merge_patch(old if old is not None else _stub(m.kind, m), m.body)


def _stub(kind: KindInfo, m: Mutation) -> dict[str, Any]:
    """An object the replay did not see created (it existed before the churn)."""
    meta = {"name": m.name, "namespace": m.namespace, "labels": dict(m.labels_before)}
    return {"apiVersion": kind.api_version, "kind": kind.kind, "metadata": meta}


def admission_review(m: Mutation, old: Any, new: Any) -> dict[str, Any]:
    """The AdmissionReview the API server would send for ``m`` (old/new as replayed)."""
    operation = {"create": "CREATE", "delete": "DELETE"}.get(m.operation, "UPDATE")
    if old is None and operation != "CREATE":
        old = _stub(m.kind, m)
    request: dict[str, Any] = {
        "uid": f"churn-{m.id}",
        "kind": {"group": m.kind.group, "version": m.kind.version, "kind": m.kind.kind},
        "resource": {
            "group": m.kind.group,
            "version": m.kind.version,
            "resource": m.kind.resource,
        },
        "subResource": m.subresource,
        "name": m.name,
        "namespace": m.namespace,
        "operation": operation,
        "object": None if operation == "DELETE" else new,
        "oldObject": None if operation == "CREATE" else old,
    }
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
