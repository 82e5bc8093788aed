"""Seeded churn plans: which object to write, how, and when. Pure: no I/O, no clock.

``make_plan(spec)`` walks an evolving model of every object in the pool and picks, for
each write slot on the timeline, an operation the model allows (create only when absent,
updates and deletes only when present, every update really changes what it names), so a
plan never writes something the API server must refuse. Randomness comes only from
``random.Random(seed)`` and a Faker seeded alike: the same ``ChurnSpec`` gives the same
plan. ``check_plan`` replays a plan against an independent model and lists every violation.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from faker import Faker

from harness.churn.model import (
    KINDS,
    KindInfo,
    Mutation,
    MutationOp,
    ObjectId,
    apply_merge_patch,
    frozen_map,
    labels_of,
)

MAX_MUTATIONS = 100_000
CHURN_LABEL = "harness.kyma-project.io/churn"
DEFAULT_FLIP_LABEL = "harness.kyma-project.io/churn-flip"
CHANNELS = ("regular", "fast", "stable", "experimental", "nightly")
STATES = ("Ready", "Processing", "Error", "Warning", "Deleting")
_NOT_DNS = re.compile(r"[^a-z0-9]+")


@dataclass(frozen=True)
class ChurnMix:
    """Relative weights of the operations (need not add up to anything)."""

    create: float = 1.0
    spec_update: float = 3.0
    status_update: float = 1.0
    label_flip: float = 1.0
    delete: float = 1.0

    def __post_init__(self) -> None:
        if any(w < 0 or not math.isfinite(w) for w in self._weights().values()):
            raise ValueError(f"mix weights must be finite and non-negative: {self}")

    def _weights(self) -> dict[str, float]:
        """Weight per operation name (field ``spec_update`` is operation ``spec-update``)."""
        return {name.replace("_", "-"): w for name, w in asdict(self).items()}

    def weight(self, op: MutationOp) -> float:
        return self._weights()[op]


@dataclass(frozen=True)
class ChurnSpec:
    """What to churn. ``rate`` is writes per second *per cluster* (the scenario format's
    meaning); ``kinds`` are keys of ``harness.churn.model.KINDS``; ``namespaces`` overrides
    a kind's namespace; ``labels`` go on every created object; ``flip_labels`` are what a
    label flip toggles (default: ``labels``, or ``{DEFAULT_FLIP_LABEL: "on"}`` if empty)."""

    clusters: tuple[str, ...]
    kinds: tuple[str, ...] = ("configmaps",)
    mix: ChurnMix = field(default_factory=ChurnMix)
    objects: int = 10
    rate: float = 10.0
    duration: float = 10.0
    seed: int = 0
    labels: Mapping[str, str] = field(default_factory=frozen_map, hash=False)
    namespaces: Mapping[str, str] = field(default_factory=frozen_map, hash=False)
    flip_labels: Mapping[str, str] = field(default_factory=frozen_map, hash=False)
    name_prefix: str = "churn"
    max_mutations: int = MAX_MUTATIONS

    def __post_init__(self) -> None:
        problems = []
        if not self.clusters:
            problems.append("clusters: at least one cluster is needed")
        if len(set(self.clusters)) != len(self.clusters):
            problems.append(f"clusters: duplicates in {list(self.clusters)}")
        unknown = [k for k in self.kinds if k not in KINDS]
        if not self.kinds or unknown:
            problems.append(f"kinds: need one or more of {sorted(KINDS)}, got {list(self.kinds)}")
        if self.objects < 1:
            problems.append(f"objects: must be at least 1, got {self.objects}")
        if not (self.rate > 0 and math.isfinite(self.rate)):
            problems.append(f"rate: must be a positive number, got {self.rate}")
        if not (self.duration > 0 and math.isfinite(self.duration)):
            problems.append(f"duration: must be a positive number, got {self.duration}")
        if self.max_mutations < 0:
            problems.append(f"max_mutations: must not be negative, got {self.max_mutations}")
        if problems:
            raise ValueError("invalid churn spec: " + "; ".join(problems))
        for name in ("labels", "namespaces", "flip_labels"):
            object.__setattr__(self, name, frozen_map(getattr(self, name)))

    def kind_info(self, kind: str) -> KindInfo:
        info = KINDS[kind]
        namespace = self.namespaces.get(kind)
        return replace(info, namespace=namespace) if namespace else info

    @property
    def toggled_labels(self) -> Mapping[str, str]:
        return self.flip_labels or self.labels or frozen_map({DEFAULT_FLIP_LABEL: "on"})

    @property
    def per_cluster(self) -> int:
        """Write slots per cluster: ``rate * duration``, capped by ``max_mutations``."""
        wanted = math.floor(self.rate * self.duration + 1e-9)
        return min(wanted, self.max_mutations // len(self.clusters))


@dataclass
class _Slot:
    name: str
    obj: dict[str, Any] | None = None


def make_plan(spec: ChurnSpec) -> list[Mutation]:
    """The plan for ``spec``: mutations in time order, ids 0, 1, 2, …"""
    rng = random.Random(spec.seed)
    fake = Faker("en_US")
    fake.seed_instance(spec.seed)
    names = _pool_names(spec, fake)
    pools = {
        (cluster, kind): [_Slot(name) for name in names[kind]]
        for cluster in spec.clusters
        for kind in spec.kinds
    }
    plan: list[Mutation] = []
    for at, cluster in _timeline(spec):
        kind = rng.choice(spec.kinds)
        mutation = _next(spec, rng, fake, pools[(cluster, kind)], len(plan), at, cluster, kind)
        if mutation is not None:
            plan.append(mutation)
    return plan


def _pool_names(spec: ChurnSpec, fake: Faker) -> dict[str, list[str]]:
    prefix = _NOT_DNS.sub("-", spec.name_prefix.lower()).strip("-") or "churn"
    out: dict[str, list[str]] = {}
    for kind in spec.kinds:
        out[kind] = []
        for index in range(spec.objects):
            word = _NOT_DNS.sub("", fake.word().lower())[:20] or "obj"
            out[kind].append(f"{prefix}-{word}-{index}"[:63].rstrip("-"))
    return out


def _timeline(spec: ChurnSpec) -> list[tuple[float, str]]:
    period = 1.0 / spec.rate
    count = len(spec.clusters)
    slots = [
        (round(i * period + c * period / count, 6), c, cluster)
        for c, cluster in enumerate(spec.clusters)
        for i in range(spec.per_cluster)
    ]
    slots.sort()
    return [(at, cluster) for at, _, cluster in slots]


def _next(
    spec: ChurnSpec,
    rng: random.Random,
    fake: Faker,
    pool: list[_Slot],
    mutation_id: int,
    at: float,
    cluster: str,
    kind: str,
) -> Mutation | None:
    info = spec.kind_info(kind)
    absent = [s for s in pool if s.obj is None]
    present = [s for s in pool if s.obj is not None]
    allowed: list[MutationOp] = []
    if absent:
        allowed.append("create")
    if present:
        allowed += ["spec-update", "label-flip", "delete"]
        if info.has_status:
            allowed.append("status-update")
    weighted = [op for op in allowed if spec.mix.weight(op) > 0]
    if weighted:
        op = rng.choices(weighted, weights=[spec.mix.weight(o) for o in weighted])[0]
    elif absent:
        op = "create"
    else:
        return None
    slot = rng.choice(absent if op == "create" else present)
    before = slot.obj
    body = _body(spec, info, op, slot, rng, fake, mutation_id)
    slot.obj = None if op == "delete" else apply_merge_patch(before, body)
    return Mutation(
        id=mutation_id,
        at=at,
        cluster=cluster,
        kind=info,
        namespace=info.namespace,
        name=slot.name,
        operation=op,
        body=body,
        labels_before=frozen_map(labels_of(before)),
        labels_after=frozen_map(labels_of(slot.obj)),
        has_spec=info.has_spec,
    )


def _body(
    spec: ChurnSpec,
    info: KindInfo,
    op: MutationOp,
    slot: _Slot,
    rng: random.Random,
    fake: Faker,
    mutation_id: int,
) -> dict[str, Any] | None:
    current = slot.obj or {}
    if op == "delete":
        return None
    if op == "create":
        labels = {**spec.labels, **spec.toggled_labels, CHURN_LABEL: "true"}
        meta = {"name": slot.name, "namespace": info.namespace, "labels": labels}
        obj: dict[str, Any] = {"apiVersion": info.api_version, "kind": info.kind, "metadata": meta}
        if info.has_spec:
            obj["spec"] = {"channel": rng.choice(CHANNELS)}
        else:
            obj[_data_field(info)] = _data(fake, mutation_id)
        return obj
    if op == "spec-update":
        if info.has_spec:
            channel = (current.get("spec") or {}).get("channel")
            return {"spec": {"channel": rng.choice([c for c in CHANNELS if c != channel])}}
        return {_data_field(info): _data(fake, mutation_id)}
    if op == "status-update":
        state = (current.get("status") or {}).get("state")
        return {"status": {"state": rng.choice([s for s in STATES if s != state])}}
    # label-flip
    labels = labels_of(current)
    toggled = spec.toggled_labels
    all_on = all(labels.get(k) == v for k, v in toggled.items())
    return {"metadata": {"labels": {k: (None if all_on else v) for k, v in toggled.items()}}}


def _data_field(info: KindInfo) -> str:
    return "stringData" if info.kind == "Secret" else "data"


def _data(fake: Faker, mutation_id: int) -> dict[str, str]:
    """Fresh content: the mutation id makes it differ from every earlier value."""
    return {"word": fake.word(), "sentence": fake.sentence(nb_words=4), "rev": str(mutation_id)}


def check_plan(plan: Sequence[Mutation]) -> list[str]:
    """Replay ``plan`` against a fresh model; every violation as one line (empty: valid)."""
    problems: list[str] = []
    objects: dict[ObjectId, Any] = {}
    for index, m in enumerate(plan):
        where = m.describe()
        if m.id != index:
            problems.append(f"{where}: id {m.id} at position {index}")
        if index and m.at < plan[index - 1].at:
            problems.append(f"{where}: offset goes back in time")
        before = objects.get(m.object_id)
        if (m.operation == "create") != (before is None):
            state = "exists" if before is not None else "does not exist"
            problems.append(f"{where}: object {state}")
            continue
        after = None if m.operation == "delete" else apply_merge_patch(before, m.body)
        problems += [f"{where}: {problem}" for problem in _write_problems(m, before, after)]
        if after is None:
            objects.pop(m.object_id, None)
        else:
            objects[m.object_id] = after
    return problems


def _write_problems(m: Mutation, before: Any, after: Any) -> Iterator[str]:
    """How ``m`` disagrees with the model's object ``before`` it and ``after`` it."""
    if m.operation == "status-update" and not m.kind.has_status:
        yield f"{m.kind.resource} has no status subresource"
    if dict(m.labels_before) != labels_of(before):
        yield f"labels_before {dict(m.labels_before)} != model"
    if m.operation == "delete" and m.body is not None:
        yield "delete carries a body"
    if dict(m.labels_after) != labels_of(after):
        yield f"labels_after {dict(m.labels_after)} != model"
    if m.operation in ("spec-update", "status-update", "label-flip") and after == before:
        yield "changes nothing"
    if m.operation == "label-flip" and dict(m.labels_before) == dict(m.labels_after):
        yield "label flip leaves the labels as they were"
    if m.has_spec != ("spec" in (after or before or {})):
        yield f"has_spec {m.has_spec} disagrees with the object"
