"""The churn's vocabulary: kinds of objects, planned mutations, executed mutations. Pure.

A ``Mutation`` is one planned write; an ``ExecutedMutation`` is what happened when the
runner sent it (when, whether the API server accepted it, the labels before and after).
Everything is frozen; mapping fields are read-only views, and ``Mutation.payload()`` hands
out a fresh copy of the body for a client that may modify what it sends.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any, Literal

from watcher.model import GroupVersionKind

MutationOp = Literal["create", "spec-update", "status-update", "label-flip", "delete"]


def frozen_map(value: Mapping[str, str] | None = None) -> Mapping[str, str]:
    """A read-only copy of ``value`` (labels and other string maps)."""
    return MappingProxyType(dict(value or {}))


@dataclass(frozen=True)
class KindInfo:
    """An API resource the churn writes: where it lives and what it has.

    ``has_spec``: objects carry a ``spec`` (ConfigMaps and Secrets do not; their "spec
    update" changes ``data``). ``has_status``: the resource has a ``status`` subresource.
    """

    group: str
    version: str
    resource: str
    kind: str
    namespace: str
    has_spec: bool
    has_status: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def gvk(self) -> GroupVersionKind:
        return GroupVersionKind(self.group, self.version, self.kind)

    def __str__(self) -> str:
        return f"{self.resource}.{self.group}" if self.group else self.resource


KYMAS = KindInfo("operator.kyma-project.io", "v1beta2", "kymas", "Kyma", "kyma-system", True, True)
CONFIGMAPS = KindInfo("", "v1", "configmaps", "ConfigMap", "default", False, False)
SECRETS = KindInfo("", "v1", "secrets", "Secret", "default", False, False)
KINDS: Mapping[str, KindInfo] = MappingProxyType(
    {k.resource: k for k in (KYMAS, CONFIGMAPS, SECRETS)}
)

ObjectId = tuple[str, str, str, str, str]
"""(cluster, group, resource, namespace, name): one object in one cluster."""


@dataclass(frozen=True)
class Mutation:
    """One planned write.

    ``body``: the whole object for ``create``, a JSON merge patch for the updates (sent to
    the ``status`` subresource for ``status-update``), ``None`` for ``delete``.
    ``labels_before``/``labels_after``: the object's labels as the plan's model expects
    them (empty when the object does not exist).
    """

    id: int
    at: float
    cluster: str
    kind: KindInfo
    namespace: str
    name: str
    operation: MutationOp
    body: Mapping[str, Any] | None = field(hash=False)
    labels_before: Mapping[str, str] = field(hash=False)
    labels_after: Mapping[str, str] = field(hash=False)
    has_spec: bool

    @property
    def subresource(self) -> str:
        return "status" if self.operation == "status-update" else ""

    @property
    def object_id(self) -> ObjectId:
        return (self.cluster, self.kind.group, self.kind.resource, self.namespace, self.name)

    def payload(self) -> dict[str, Any] | None:
        """A deep copy of ``body``, safe to hand to a client."""
        return None if self.body is None else copy.deepcopy(dict(self.body))

    def describe(self) -> str:
        """``#12 +1.200s skr-a create configmaps default/churn-apple-3``."""
        return (
            f"#{self.id} +{self.at:.3f}s {self.cluster} {self.operation} "
            f"{self.kind.resource} {self.namespace}/{self.name}"
        )


class WriteFailure(StrEnum):
    """What a failed write did on the API server — what the ground truth may assume: it was
    ``refused`` before admission, ``admitted`` and then refused by storage (a CREATE
    answered 409), or of ``unknown`` effect (see the table in docs/ground-truth.md)."""

    REFUSED = "refused"
    ADMITTED = "admitted"
    UNKNOWN = "unknown"


def write_failure(operation: MutationOp, status: int, reached: bool) -> WriteFailure:
    """Classify a failed write by its HTTP status (0 = no answer) and whether the request
    may have reached the server."""
    if status == 0:
        return WriteFailure.UNKNOWN if reached else WriteFailure.REFUSED
    if status == 409 and operation == "create":
        return WriteFailure.ADMITTED
    if status in (500, 504):
        return WriteFailure.UNKNOWN
    return WriteFailure.REFUSED


class WriteFailed(Exception):
    """Raised by a churn ``write`` that knows how its write failed (see ``WriteFailure``);
    any other exception counts as ``refused``."""

    def __init__(self, message: str, failure: WriteFailure) -> None:
        super().__init__(message)
        self.failure = failure


@dataclass(frozen=True)
class ExecutedMutation:
    """What happened to one mutation. Times come from the runner's clock, which must be the
    clock that timestamps received events (see ``harness.churn.runner``)."""

    mutation: Mutation
    sent_at: float
    acked_at: float
    ok: bool
    error: str = ""
    labels_before: Mapping[str, str] = field(default_factory=frozen_map, hash=False)
    labels_after: Mapping[str, str] = field(default_factory=frozen_map, hash=False)
    failure: WriteFailure | None = None
    """How a failed write failed (``None`` when ``ok``; ``refused`` unless known better)."""

    @property
    def id(self) -> int:
        return self.mutation.id

    def describe(self) -> str:
        outcome = "ok" if self.ok else f"failed ({self.failure or 'refused'}): {self.error}"
        times = f"sent {self.sent_at:.3f} acked {self.acked_at:.3f}"
        return f"{self.mutation.describe()} {times} {outcome}"


def apply_merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch; returns a new value, leaves both arguments untouched."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    result: dict[str, Any] = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = apply_merge_patch(result.get(key), value)
    return {k: copy.deepcopy(v) for k, v in result.items()}


def labels_of(obj: Mapping[str, Any] | None) -> dict[str, str]:
    """``metadata.labels`` of ``obj`` (string values only)."""
    meta = (obj or {}).get("metadata")
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    if not isinstance(labels, Mapping):
        return {}
    return {str(k): v for k, v in labels.items() if isinstance(v, str)}
