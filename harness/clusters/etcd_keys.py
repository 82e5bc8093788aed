"""The keys under one API server's etcd prefix: listed, and deleted behind its back.

This is what lets a pooled API server (:mod:`harness.clusters.pool`) be handed to the next
scenario as if it were new: every object is a key under ``/<prefix>/``, and kube-apiserver
follows etcd's watch, so a key deleted here is gone from its caches and its informers
(webhook configurations, RBAC, namespaces) a moment later — without finalizers, garbage
collection or a namespace controller, none of which a local cluster runs.

etcd's gRPC gateway speaks JSON over the client URL (``/v3/kv/range``, ``/v3/kv/txn``;
keys base64-encoded), so aiohttp is enough; no etcd client library is needed.

:func:`reset_plan` is the pure decision: what to delete, and whether the server can be
reused at all.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import aiohttp

from harness.errors import ClusterError

TXN_OPS = 100
"""Deletes per transaction (etcd's ``--max-txn-ops`` defaults to 128)."""

GUARDED = ("namespaces/",)
"""Baseline keys a scenario must not have changed or deleted: the system namespaces. The
CRDs are compared by their spec instead (an apply by another field manager rewrites them
unchanged); the other baseline keys are the API server's own bookkeeping (leases,
endpoints of ``kubernetes``, APIService status, IP ranges), which it keeps rewriting."""


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _prefix_end(prefix: str) -> str:
    """etcd's range end for "every key starting with ``prefix``"."""
    return prefix[:-1] + chr(ord(prefix[-1]) + 1)


Keys = Mapping[str, int]
"""Key → its ``mod_revision``."""


@dataclass(frozen=True)
class ResetPlan:
    """What returning a server to its baseline takes: the keys to delete, or why not."""

    delete: tuple[str, ...]
    refused: str | None = None


def reset_plan(prefix: str, baseline: Keys, now: Keys) -> ResetPlan:
    """Delete every key that is not in ``baseline``; refuse when a guarded baseline key
    was changed or deleted — that cluster is not as new any more."""
    for key, revision in baseline.items():
        if not key.removeprefix(prefix).startswith(GUARDED):
            continue
        if key not in now:
            return ResetPlan((), f"{key} was deleted")
        if now[key] != revision:
            return ResetPlan((), f"{key} was changed")
    return ResetPlan(tuple(sorted(k for k in now if k not in baseline)))


class EtcdKeys:
    """List and delete the keys under ``prefix`` (e.g. ``/pool-3/``) of the etcd at ``url``."""

    def __init__(self, session: aiohttp.ClientSession, url: str, prefix: str) -> None:
        self._session = session
        self._url = url
        self.prefix = prefix

    async def _post(self, path: str, body: Mapping[str, object]) -> Mapping[str, object]:
        async with self._session.post(f"{self._url}{path}", json=body) as response:
            if response.status != 200:
                raise ClusterError(f"etcd {path}: {response.status} {await response.text()}")
            result: Mapping[str, object] = await response.json()
            return result

    async def list(self) -> dict[str, int]:
        """Every key under the prefix, with its ``mod_revision``."""
        body = {"key": _b64(self.prefix), "range_end": _b64(_prefix_end(self.prefix))}
        result = await self._post("/v3/kv/range", {**body, "keys_only": True})
        kvs = result.get("kvs") or []
        assert isinstance(kvs, list)
        return {base64.b64decode(kv["key"]).decode(): int(kv["mod_revision"]) for kv in kvs}

    async def delete(self, keys: Sequence[str]) -> None:
        """Delete ``keys``, ``TXN_OPS`` per transaction."""
        for start in range(0, len(keys), TXN_OPS):
            chunk = keys[start : start + TXN_OPS]
            ops = [{"request_delete_range": {"key": _b64(k)}} for k in chunk]
            await self._post("/v3/kv/txn", {"success": ops})
