"""What the function tests share: a CA and a leaf it issued at a fixed moment (the
``frozen`` fixture, in ``conftest.py``, stops the functions' clock there), and base64."""

from __future__ import annotations

import base64
import datetime as dt

from watcher import pki

NOW = dt.datetime(2026, 11, 27, 20, 0, tzinfo=dt.UTC)
NOW_EPOCH = 1795809600
CA = pki.create_ca("kcp-ca-1", key_type="ec", now=NOW - dt.timedelta(days=1))
LEAF = pki.issue(
    CA,
    "runtime-skr-a",
    organizations=["kyma"],
    dns_names=["skr-a.kyma.example.com", *pki.WEBHOOK_SERVICE_SANS],
    ip_addresses=["127.0.0.1", "::1"],
    uris=["spiffe://kyma/runtime-skr-a"],
    now=NOW,
    key_type="ec",
)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")
