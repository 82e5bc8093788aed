"""``kubernetes.io/tls`` Secrets in the KCP, as cert-manager and KLM write them (pure).

Both certificate Secrets of KLM hold ``tls.crt``, ``tls.key`` and ``ca.crt``; these two
functions turn PEM bytes into such a Secret and back, so the managers that write them and
the gateway that reads one agree on one layout.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
from collections.abc import Mapping
from typing import Any

from harness.errors import HarnessError
from watcher.domain import (
    CA_ADDED_ANNOTATION,
    GATEWAY_SECRET_NAME,
    ISTIO_NAMESPACE,
    LIFECYCLE_MANAGER,
    MANAGED_BY_LABEL,
)

TLS_KEYS = ("tls.crt", "tls.key", "ca.crt")


class SecretLayoutError(HarnessError):
    """A certificate Secret lacks a key or holds something that is not base64."""


def tls_secret(
    name: str,
    namespace: str,
    data: Mapping[str, bytes],
    *,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A ``kubernetes.io/tls`` Secret holding ``data`` (PEM bytes by key)."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": dict(labels or {}),
            "annotations": dict(annotations or {}),
        },
        "type": "kubernetes.io/tls",
        "data": {k: base64.b64encode(v).decode("ascii") for k, v in sorted(data.items())},
    }


def tls_data(secret: Mapping[str, Any]) -> dict[str, bytes]:
    """``tls.crt``, ``tls.key``, ``ca.crt`` of a Secret as PEM bytes."""
    meta = secret.get("metadata") or {}
    where = f"Secret {meta.get('namespace')}/{meta.get('name')}"
    data = secret.get("data") or {}
    missing = [k for k in TLS_KEYS if not data.get(k)]
    if missing:
        raise SecretLayoutError(f"{where} lacks {', '.join(missing)}")
    try:
        return {k: base64.b64decode(data[k], validate=True) for k in TLS_KEYS}
    except (binascii.Error, ValueError) as exc:
        raise SecretLayoutError(f"{where} holds data that is not base64: {exc}") from None


def gateway_secret(
    cert: bytes, key: bytes, bundle: bytes, added_at: str, **annotations: str
) -> dict[str, Any]:
    """The gateway Secret Istio's ingress serves: the serving pair, every unexpired CA
    (newest first) and ``caAddedToBundleAt``, when the newest arrived."""
    return tls_secret(
        GATEWAY_SECRET_NAME,
        ISTIO_NAMESPACE,
        {"tls.crt": cert, "tls.key": key, "ca.crt": bundle},
        labels={MANAGED_BY_LABEL: LIFECYCLE_MANAGER},
        annotations={CA_ADDED_ANNOTATION: added_at, **annotations},
    )


def ca_added_at(secret: Mapping[str, Any] | None) -> dt.datetime | None:
    """The gateway Secret's ``caAddedToBundleAt`` (None: absent, unreadable or naive)."""
    annotations = ((secret or {}).get("metadata") or {}).get("annotations") or {}
    try:
        at = dt.datetime.fromisoformat(str(annotations[CA_ADDED_ANNOTATION]))
    except (KeyError, ValueError):
        return None
    return at if at.tzinfo is not None else None
