"""SKR writes for the benchmarks that run the whole environment (admission, end-to-end).

Writes go straight over HTTPS with the cluster's admin certificate (one aiohttp session per
SKR, keep-alive), so the client adds as little time and CPU as possible to what is
measured. Bench Kymas live in ``kyma-system``: *watched* ones carry the labels KLM's
Watcher selects (their spec writes pass the SKR webhook), *plain* ones carry none (the API
server never calls the webhook for them) — the same write with and without the webhook.
"""

from __future__ import annotations

import json
import ssl
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass

import aiohttp

from harness.environment import RUNTIME_ID_LABEL, SKR_NAMESPACE, WatcherEnvironment
from harness.environment.spec import SKR_KYMA_LABELS
from harness.kube import KYMAS

MERGE_PATCH = {"Content-Type": "application/merge-patch+json", "Accept": "application/json"}


class WriteFailed(RuntimeError):
    """An SKR write was not answered 200/201."""


@dataclass
class SkrWriter:
    """PATCHes/creates Kymas on one SKR API server over a keep-alive session."""

    name: str
    runtime_id: str
    server: str
    session: aiohttp.ClientSession
    ssl_context: ssl.SSLContext

    def _url(self, name: str | None = None) -> str:
        return self.server + KYMAS.path(SKR_NAMESPACE, name)

    async def create_kyma(self, name: str, *, watched: bool) -> None:
        labels = {**SKR_KYMA_LABELS, RUNTIME_ID_LABEL: self.runtime_id} if watched else {}
        body = {
            "apiVersion": KYMAS.api_version,
            "kind": "Kyma",
            "metadata": {"name": name, "namespace": SKR_NAMESPACE, "labels": labels},
            "spec": {"channel": "regular"},
        }
        async with self.session.post(self._url(), json=body, ssl=self.ssl_context) as r:
            text = await r.text()
            if r.status not in (200, 201, 409):
                raise WriteFailed(f"create {self.name}/{name}: {r.status} {text[:200]}")

    async def patch_spec(self, name: str, value: str) -> float:
        """Change the Kyma's spec; returns the wall time (``time.time()``) it was sent."""
        body = json.dumps({"spec": {"bench": value}})
        sent = time.time()
        async with self.session.patch(
            self._url(name), data=body, headers=MERGE_PATCH, ssl=self.ssl_context
        ) as r:
            await r.read()
            if r.status != 200:
                raise WriteFailed(f"patch {self.name}/{name}: {r.status}")
        return sent

    async def timed_patch(self, name: str, value: str) -> float:
        """Seconds one spec write takes, measured around the request (perf_counter)."""
        started = time.perf_counter()
        await self.patch_spec(name, value)
        return time.perf_counter() - started


@asynccontextmanager
async def skr_writers(
    env: WatcherEnvironment, *, pool: int = 64
) -> AsyncIterator[dict[str, SkrWriter]]:
    """One :class:`SkrWriter` per SKR of ``env`` (by cluster name), closed on exit."""
    async with AsyncExitStack() as stack:
        writers = {}
        for skr in env.spec.skrs:
            cluster = env.clusters[skr.name]
            session = await stack.enter_async_context(
                aiohttp.ClientSession(
                    connector=aiohttp.TCPConnector(limit=pool),
                    timeout=aiohttp.ClientTimeout(total=30),
                )
            )
            writers[skr.name] = SkrWriter(
                skr.name, skr.runtime_id, cluster.server, session, cluster.ssl_context()
            )
        yield writers
