"""Admission request → WatchEvent decision. Pure: no I/O, no clock, total on any input.

The rules are upstream's (``runtime-watcher`` ``admissionreview/handler.go``):

* CREATE sends an event for ``request.object``; DELETE for ``request.oldObject``.
* UPDATE without subresource: when both objects have a ``spec`` mapping (``{}`` counts),
  send only if the specs differ; when either lacks one, every UPDATE is an event.
* UPDATE of the ``status`` subresource: send only if ``status`` differs (missing and ``{}``
  differ, as Go's ``reflect.DeepEqual`` on a nil and an empty map).
* Any other subresource and CONNECT send nothing.

The contract (``v1``/``v2``) only names the KCP path; the event is the same on both, as
upstream's webhook 2.1+ sends it. ``legacy_owner`` restores what upstream did before 2.1:
every event carries ``owner`` from the ``operator.kyma-project.io/owned-by`` annotation,
and an object without it sends nothing (``unknown-owner``).

Equality follows the Go side too: upstream decodes ``spec``/``status`` into
``map[string]any``, so JSON numbers compare as float64 and a non-object ``spec`` (or
``null``) is the same as no ``spec`` at all.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from watcher.errors import InvalidAdmissionReview
from watcher.model import (
    OWNED_BY_ANNOTATION,
    AdmissionRequest,
    GroupVersionKind,
    ObjectKey,
    WatchEvent,
    parse_admission_review,
)

KCP_REQUEST_SUCCEEDED = "kcp request succeeded"
KCP_REQUEST_FAILED = "kcp request failed"


class Reason(StrEnum):
    """Why an event is or is not sent; stable strings used in logs, metrics and tests."""

    CREATED = "created"
    DELETED = "deleted"
    SPEC_CHANGED = "spec-changed"
    NO_SPEC = "no-spec"
    STATUS_CHANGED = "status-changed"
    NO_CHANGE = "no-change"
    INVALID_SUBRESOURCE = "invalid-subresource"
    CONNECT = "connect"
    UNKNOWN_OWNER = "unknown-owner"
    INVALID_OBJECT = "invalid-object"
    INVALID_REVIEW = "invalid-review"


@dataclass(frozen=True)
class Decision:
    """The outcome for one admission request.

    ``message`` is what the webhook answers when nothing is sent; when ``send`` is true the
    webhook replaces it with the delivery outcome (upstream's ``kcp request succeeded`` in
    sync mode), because only delivery knows whether the KCP took the event.
    """

    send: bool
    reason: Reason
    message: str
    event: WatchEvent | None = None
    uid: str = ""

    @property
    def sent_object(self) -> str:
        return str(self.event.watched) if self.event else ""


def decide(review: Any, *, manager: str, legacy_owner: bool = False) -> Decision:
    """Decide for a decoded AdmissionReview; never raises, whatever ``review`` is."""
    try:
        request = parse_admission_review(review)
    except InvalidAdmissionReview as exc:
        return Decision(False, Reason.INVALID_REVIEW, str(exc))
    except RecursionError:
        return Decision(False, Reason.INVALID_REVIEW, "review is nested too deeply")
    return decide_request(request, manager=manager, legacy_owner=legacy_owner)


def decide_request(
    request: AdmissionRequest, *, manager: str, legacy_owner: bool = False
) -> Decision:
    """Decide for an already validated request (the webhook's hot path)."""
    del manager  # the path, not the event, carries the manager; kept for a uniform signature
    op = request.operation
    if op == "CONNECT":
        message = f"operation CONNECT not supported for {request.kind.go_string()}"
        return Decision(False, Reason.CONNECT, message, uid=request.uid)
    if op == "CREATE":
        return _event_for(request, request.object, Reason.CREATED, legacy_owner)
    if op == "DELETE":
        return _event_for(request, request.old_object, Reason.DELETED, legacy_owner)
    return _decide_update(request, legacy_owner)


def _decide_update(request: AdmissionRequest, legacy_owner: bool) -> Decision:
    new, old = request.object or {}, request.old_object or {}
    sub = request.sub_resource.lower()
    key = _object_key(request, request.object)
    if sub == "":
        old_spec, new_spec = _as_map(old.get("spec")), _as_map(new.get("spec"))
        if old_spec is None or new_spec is None:
            return _event_for(request, request.object, Reason.NO_SPEC, legacy_owner)
        if go_deep_equal(old_spec, new_spec):
            return _no_change(request, key)
        return _event_for(request, request.object, Reason.SPEC_CHANGED, legacy_owner)
    if sub == "status":
        if go_deep_equal(_as_map(old.get("status")), _as_map(new.get("status"))):
            return _no_change(request, key)
        return _event_for(request, request.object, Reason.STATUS_CHANGED, legacy_owner)
    message = f"invalid subresource: watched resource {key}"
    return Decision(False, Reason.INVALID_SUBRESOURCE, message, uid=request.uid)


def _no_change(request: AdmissionRequest, key: ObjectKey) -> Decision:
    message = f"no change detected on watched resource {key}"
    return Decision(False, Reason.NO_CHANGE, message, uid=request.uid)


def _event_for(
    request: AdmissionRequest,
    obj: Mapping[str, Any] | None,
    reason: Reason,
    legacy_owner: bool,
) -> Decision:
    key = _object_key(request, obj)
    if not key.name:
        message = f"admission request {request.uid} carries no object name"
        return Decision(False, Reason.INVALID_OBJECT, message, uid=request.uid)
    owner = None
    if legacy_owner:
        owner_or_message = _owner(obj or {}, key)
        if isinstance(owner_or_message, str):
            return Decision(False, Reason.UNKNOWN_OWNER, owner_or_message, uid=request.uid)
        owner = owner_or_message
    event = WatchEvent(key, _object_gvk(request, obj), owner)
    return Decision(True, reason, f"send event for {key} to KCP", event, uid=request.uid)


def _metadata(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    meta = (obj or {}).get("metadata")
    return meta if isinstance(meta, dict) else {}


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _object_key(request: AdmissionRequest, obj: Mapping[str, Any] | None) -> ObjectKey:
    """The object's own name; the request's as fallback (it is always set for these ops)."""
    meta = _metadata(obj)
    name = _str(meta.get("name")) or request.name
    namespace = _str(meta.get("namespace")) if _str(meta.get("name")) else request.namespace
    return ObjectKey(namespace, name)


def _object_gvk(request: AdmissionRequest, obj: Mapping[str, Any] | None) -> GroupVersionKind:
    """GVK from the object's apiVersion/kind as upstream; the request's kind if absent."""
    obj = obj or {}
    api_version, kind = _str(obj.get("apiVersion")), _str(obj.get("kind"))
    if not api_version and not kind:
        return request.kind
    return GroupVersionKind.from_api_version(api_version, kind)


def _owner(obj: Mapping[str, Any], key: ObjectKey) -> ObjectKey | str:
    """The legacy contract's owner from ``operator.kyma-project.io/owned-by``, or why not."""
    annotations = _metadata(obj).get("annotations")
    value = _str(annotations.get(OWNED_BY_ANNOTATION)) if isinstance(annotations, dict) else ""
    if not value:
        return "resource owner name could not be determined"
    parts = value.split("/")
    if len(parts) != 2:
        return f"annotation {OWNED_BY_ANNOTATION} not set correctly on resource {key}: {value}"
    return ObjectKey(parts[0], parts[1])


def _as_map(value: Any) -> dict[str, Any] | None:
    """Go decodes a non-object into ``map[string]any`` as nil; so do we."""
    return value if isinstance(value, dict) else None


def go_deep_equal(a: Any, b: Any) -> bool:
    """``reflect.DeepEqual`` on values Go's ``encoding/json`` decoded into ``any``.

    Numbers are float64 there (so ``1`` equals ``1.0`` and huge integers round), booleans
    never equal numbers, and a nil map differs from an empty one. Iterative, so a spec
    nested as deep as ``json.loads`` allows cannot exhaust the stack of the caller.

    Fast path for the common case, an unchanged spec: values that Python finds equal *and*
    that encode to the same JSON text decode to the same Go value, so they are equal
    without the walk (both checks run in C). Anything else - a real change, ``true``
    against ``1``, keys in another order - takes the walk.
    """
    try:
        if a == b and json.dumps(a, allow_nan=False) == json.dumps(b, allow_nan=False):
            return True
    except (RecursionError, ValueError):
        pass  # nested deeper than the C encoder allows, or a NaN: the walk decides
    return go_deep_equal_walk(a, b)


def go_deep_equal_walk(a: Any, b: Any) -> bool:
    """:func:`go_deep_equal` without its fast path: the definition, value by value."""
    pending: list[tuple[Any, Any]] = [(a, b)]
    while pending:
        x, y = pending.pop()
        if isinstance(x, bool) or isinstance(y, bool):
            if not (type(x) is type(y) and x == y):
                return False
        elif isinstance(x, int | float) and isinstance(y, int | float):
            if _float64(x) != _float64(y):
                return False
        elif isinstance(x, dict) and isinstance(y, dict):
            if x.keys() != y.keys():
                return False
            pending.extend((x[k], y[k]) for k in x)
        elif isinstance(x, list) and isinstance(y, list):
            if len(x) != len(y):
                return False
            pending.extend(zip(x, y, strict=True))
        elif type(x) is not type(y) or x != y:
            return False
    return True


def _float64(n: int | float) -> float:
    try:
        value = float(n)
    except OverflowError:
        return math.copysign(math.inf, n)
    return value
