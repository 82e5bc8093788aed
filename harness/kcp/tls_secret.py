"""``kubernetes.io/tls`` Secrets in the KCP, as cert-manager and KLM write them (pure).

Both certificate Secrets of KLM hold ``tls.crt``, ``tls.key`` and ``ca.crt``; these two
functions turn PEM bytes into such a Secret and back, so the managers that write them and
the gateway that reads one agree on one layout.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from typing import Any

from harness.errors import HarnessError

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


__all__ = ["TLS_KEYS", "SecretLayoutError", "tls_data", "tls_secret"]
