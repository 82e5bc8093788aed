"""Wire shapes shared by the webhook and the listener.

Two shapes cross the wire: the ``admission.k8s.io/v1`` AdmissionReview that the SKR API
server posts to the webhook, and the WatchEvent that the webhook posts to the KCP. Both
are parsed here, without I/O, so the decision and the HTTP layers work on typed values
and every rejection carries a message that names the offending field.

The WatchEvent encoding reproduces Go's ``encoding/json`` output for upstream's structs
byte for byte (``types.NamespacedName`` has no JSON tags, hence ``Namespace``/``Name``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from watcher.errors import InvalidAdmissionReview, InvalidWatchEvent

Contract = Literal["v1", "v2"]
CONTRACTS: tuple[Contract, ...] = ("v1", "v2")
Operation = Literal["CREATE", "UPDATE", "DELETE", "CONNECT"]
OPERATIONS: tuple[Operation, ...] = ("CREATE", "UPDATE", "DELETE", "CONNECT")
ADMISSION_API_VERSIONS = ("admission.k8s.io/v1", "admission.k8s.io/v1beta1")

OWNED_BY_ANNOTATION = "operator.kyma-project.io/owned-by"


@dataclass(frozen=True, order=True)
class ObjectKey:
    """A namespaced name; ``namespace`` is empty for cluster-scoped objects."""

    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, order=True)
class GroupVersionKind:
    group: str
    version: str
    kind: str

    @classmethod
    def from_api_version(cls, api_version: str, kind: str) -> GroupVersionKind:
        """Split ``apiVersion`` the way apimachinery's ``FromAPIVersionAndKind`` does.

        ``v1`` is the core group; ``a/b`` is group ``a`` version ``b``; anything with
        more than one slash is unparsable and keeps only the kind, as upstream does.
        """
        if api_version in ("", "/"):
            return cls("", "", kind)
        parts = api_version.split("/")
        if len(parts) == 1:
            return cls("", parts[0], kind)
        if len(parts) == 2:
            return cls(parts[0], parts[1], kind)
        return cls("", "", kind)

    def go_string(self) -> str:
        """``metav1.GroupVersionKind.String()``, used in upstream's messages."""
        return f"{self.group}/{self.version}, Kind={self.kind}"


@dataclass(frozen=True, order=True)
class WatchEvent:
    """What the SKR tells the KCP: which object changed (and, in the legacy owner contract,
    its owner)."""

    watched: ObjectKey
    watched_gvk: GroupVersionKind
    owner: ObjectKey | None = None


@dataclass(frozen=True)
class AdmissionRequest:
    """The fields of ``AdmissionReview.request`` the watcher uses, already validated."""

    api_version: str
    uid: str
    operation: Operation
    kind: GroupVersionKind
    sub_resource: str
    name: str
    namespace: str
    object: Mapping[str, Any] | None
    old_object: Mapping[str, Any] | None


# --------------------------------------------------------------------------------------
# AdmissionReview


def _field(obj: Mapping[str, Any], key: str, where: str, kind: type | tuple[type, ...]) -> Any:
    value = obj.get(key)
    if value is not None and not isinstance(value, kind):
        expected = (
            kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        )
        raise InvalidAdmissionReview(
            f"{where}.{key} must be {_json_type_name(expected)}, got {_json_type_of(value)}"
        )
    return value


def _json_type_name(py: str) -> str:
    return {"str": "a string", "dict": "an object", "list": "an array"}.get(py, py)


def _json_type_of(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def parse_admission_review(review: Any) -> AdmissionRequest:
    """Validate a decoded AdmissionReview and return its request.

    Raises ``InvalidAdmissionReview`` with a message naming the first bad field. Only what
    the watcher needs is checked; unknown fields are ignored, as the API server may add some.
    """
    if not isinstance(review, dict):
        raise InvalidAdmissionReview(f"body must be a JSON object, got {_json_type_of(review)}")
    api_version = _field(review, "apiVersion", "review", str) or ""
    if api_version not in ADMISSION_API_VERSIONS:
        raise InvalidAdmissionReview(
            f"apiVersion must be admission.k8s.io/v1, got {api_version or 'nothing'!r}"
        )
    kind = _field(review, "kind", "review", str)
    if kind != "AdmissionReview":
        raise InvalidAdmissionReview(f"kind must be AdmissionReview, got {kind or 'nothing'!r}")
    request = _field(review, "request", "review", dict)
    if request is None:
        raise InvalidAdmissionReview("request is missing")
    uid = _field(request, "uid", "request", str)
    if not uid:
        raise InvalidAdmissionReview("request.uid is missing")
    operation = _field(request, "operation", "request", str)
    if operation not in OPERATIONS:
        raise InvalidAdmissionReview(
            f"request.operation must be one of {', '.join(OPERATIONS)}, got {operation!r}"
        )
    gvk = _field(request, "kind", "request", dict) or {}
    kind_gvk = GroupVersionKind(
        group=_field(gvk, "group", "request.kind", str) or "",
        version=_field(gvk, "version", "request.kind", str) or "",
        kind=_field(gvk, "kind", "request.kind", str) or "",
    )
    return AdmissionRequest(
        api_version=api_version,
        uid=uid,
        operation=operation,
        kind=kind_gvk,
        sub_resource=_field(request, "subResource", "request", str) or "",
        name=_field(request, "name", "request", str) or "",
        namespace=_field(request, "namespace", "request", str) or "",
        object=_field(request, "object", "request", dict),
        old_object=_field(request, "oldObject", "request", dict),
    )


def admission_response(
    request_uid: str, message: str, api_version: str = "admission.k8s.io/v1"
) -> dict[str, Any]:
    """The answer upstream gives to every review it could parse: allowed, with a message."""
    return {
        "kind": "AdmissionReview",
        "apiVersion": api_version,
        "response": {
            "uid": request_uid,
            "allowed": True,
            "status": {"metadata": {}, "status": "Success", "message": message},
        },
    }


# --------------------------------------------------------------------------------------
# WatchEvent


def _key_json(key: ObjectKey) -> dict[str, str]:
    return {"Namespace": key.namespace, "Name": key.name}


def event_to_json(event: WatchEvent) -> dict[str, Any]:
    """The JSON object upstream's Go structs marshal to, in their field order.

    The body is the same on every contract (upstream webhook 2.1+ sends it to ``/v1`` and
    ``/v2`` alike). ``owner`` appears only on an event that carries one: the legacy owner
    contract (``WATCHER_LEGACY_OWNER``, upstream before 2.1) put it first on every path.
    """
    body: dict[str, Any] = {}
    if event.owner is not None:
        body["owner"] = _key_json(event.owner)
    body["watched"] = _key_json(event.watched)
    body["watchedGvk"] = {
        "group": event.watched_gvk.group,
        "version": event.watched_gvk.version,
        "kind": event.watched_gvk.kind,
    }
    return body


_GO_HTML_ESCAPES = str.maketrans(
    {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
)


def go_json_dumps(value: Any) -> bytes:
    """Serialise like Go's ``json.Marshal``: compact, UTF-8, HTML characters escaped."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return text.translate(_GO_HTML_ESCAPES).encode("utf-8")


def encode_event(event: WatchEvent) -> bytes:
    """The exact bytes the upstream webhook POSTs for this event."""
    return go_json_dumps(event_to_json(event))


def _get_folded(obj: Mapping[str, Any], name: str) -> Any:
    """Go's decoder: an exact key wins, otherwise the first case-insensitive match."""
    if name in obj:
        return obj[name]
    lowered = name.lower()
    for key, value in obj.items():
        if isinstance(key, str) and key.lower() == lowered:
            return value
    return None


def _decode_key(obj: Any, where: str) -> ObjectKey:
    if obj is None:
        return ObjectKey("", "")
    if not isinstance(obj, dict):
        raise InvalidWatchEvent(f"{where} must be an object, got {_json_type_of(obj)}")
    parts = []
    for field in ("Namespace", "Name"):
        value = _get_folded(obj, field)
        if value is not None and not isinstance(value, str):
            raise InvalidWatchEvent(f"{where}.{field} must be a string")
        parts.append(value or "")
    return ObjectKey(parts[0], parts[1])


def event_from_json(obj: Any) -> WatchEvent:
    """Decode a WatchEvent object, accepting any key case as Go's decoder does."""
    if not isinstance(obj, dict):
        raise InvalidWatchEvent(f"event must be a JSON object, got {_json_type_of(obj)}")
    watched = _decode_key(_get_folded(obj, "watched"), "watched")
    gvk_obj = _get_folded(obj, "watchedGvk")
    if gvk_obj is None:
        gvk_obj = {}
    if not isinstance(gvk_obj, dict):
        raise InvalidWatchEvent("watchedGvk must be an object")
    gvk_parts = []
    for field in ("group", "version", "kind"):
        value = _get_folded(gvk_obj, field)
        if value is not None and not isinstance(value, str):
            raise InvalidWatchEvent(f"watchedGvk.{field} must be a string")
        gvk_parts.append(value or "")
    owner_obj = _get_folded(obj, "owner")
    owner = _decode_key(owner_obj, "owner") if owner_obj is not None else None
    return WatchEvent(watched, GroupVersionKind(*gvk_parts), owner)


def decode_event(body: bytes) -> WatchEvent:
    """Parse a WatchEvent body; ``InvalidWatchEvent`` says what is wrong."""
    try:
        obj = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidWatchEvent(f"body is not valid JSON: {exc}") from None
    except RecursionError:
        raise InvalidWatchEvent("body is nested too deeply") from None
    return event_from_json(obj)
