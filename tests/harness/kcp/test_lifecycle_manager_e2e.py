"""The Lifecycle Manager stand-in against a real KCP: startup, events, drops, SAN pinning."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import aiohttp
import pytest

from harness.clusters.plane import Cluster
from harness.kcp.lifecycle_manager.manager import LifecycleManager, RequeueIntervals, Trigger
from harness.kube import KYMAS, create, get
from watcher import pki
from watcher.listener import XFCC_HEADER, ListenerConfig, format_xfcc

pytestmark = pytest.mark.e2e
NEVER = RequeueIntervals(success=3600, busy=3600, error=3600, warning=3600)
BODY = json.dumps(
    {
        "watched": {"Namespace": "kyma-system", "Name": "default"},
        "watchedGvk": {"group": "operator.kyma-project.io", "version": "v1beta2", "kind": "Kyma"},
    }
)


def kyma(name: str, runtime_id: str) -> dict[str, Any]:
    return {
        "apiVersion": "operator.kyma-project.io/v1beta2",
        "kind": "Kyma",
        "metadata": {
            "name": name,
            "namespace": "kcp-system",
            "labels": {"kyma-project.io/runtime-id": runtime_id},
            "annotations": {"skr-domain": f"{name}.skr.example.com"},
        },
        "spec": {"channel": "regular"},
    }


def xfcc(ca: pki.CertificateAuthority, runtime_id: str, domain: str) -> str:
    """The header the KCP gateway would set for a client certificate with CN = runtime id."""
    return format_xfcc(pki.issue_runtime_certificate(ca, runtime_id, domain).certificate)


async def post_event(
    session: aiohttp.ClientSession,
    url: str,
    ca: pki.CertificateAuthority,
    runtime_id: str,
    domain: str,
) -> int:
    return await post(session, url, xfcc(ca, runtime_id, domain))


async def post(session: aiohttp.ClientSession, url: str, header: str) -> int:
    async with session.post(url, data=BODY, headers={XFCC_HEADER: header}) as resp:
        return resp.status


async def test_startup_and_event_reconciles(kcp: Cluster) -> None:
    ca = pki.create_ca()
    async with kcp.api_client() as api, aiohttp.ClientSession() as session:
        await create(api, KYMAS, kyma("kyma-a", "rt-a"))
        await create(api, KYMAS, kyma("kyma-b", "rt-b"))
        config = ListenerConfig(component="lifecycle-manager", identity="xfcc")
        async with LifecycleManager(api, listener_config=config, intervals=NEVER) as klm:
            assert klm.listener is not None
            for name in ("kyma-a", "kyma-b"):
                await klm.wait_for_reconcile(f"kcp-system/{name}", Trigger.STARTUP, timeout=10)
            ready = await get(api, KYMAS, "kyma-a", "kcp-system")
            assert ready is not None and ready["status"]["state"] == "Ready"

            header = xfcc(ca, "rt-a", "x.example")
            since = time.time()
            assert await post(session, klm.listener.event_url, header) == 200
            hit = await klm.wait_for_reconcile(
                "kcp-system/kyma-a", Trigger.WATCH_EVENT, since=since, timeout=2
            )
            print(f"reconcile after event: {(hit.at - since) * 1000:.1f} ms after the POST")
            assert hit.at - since < 2
            assert klm.reconciles("kcp-system/kyma-b", Trigger.WATCH_EVENT) == []

            status = await post_event(session, klm.listener.event_url, ca, "rt-zzz", "x.example")
            assert status == 200  # accepted by the listener, dropped by the manager
            await wait_counter(klm, "events:dropped-unknown-runtime", 1)
            assert len(klm.reconciles(trigger=Trigger.WATCH_EVENT)) == 1


async def wait_counter(klm: LifecycleManager, name: str, value: int) -> None:
    async with asyncio.timeout(2):
        while klm.counters[name] < value:
            await asyncio.sleep(0.01)
    assert klm.counters[name] == value


async def test_san_pinning_rejects_a_certificate_for_another_domain(kcp: Cluster) -> None:
    ca = pki.create_ca()
    async with kcp.api_client() as api, aiohttp.ClientSession() as session:
        await create(api, KYMAS, kyma("kyma-a", "rt-a"))
        config = ListenerConfig(component="lifecycle-manager", identity="xfcc")
        async with LifecycleManager(
            api, listener_config=config, pin_san=True, intervals=NEVER
        ) as klm:
            assert klm.listener is not None
            await klm.wait_for_reconcile("kcp-system/kyma-a", Trigger.STARTUP, timeout=10)
            url = klm.listener.event_url
            assert await post_event(session, url, ca, "rt-a", "evil.example.com") == 403
            assert klm.counters["events:received"] == 0
            since = time.time()
            assert await post_event(session, url, ca, "rt-a", "kyma-a.skr.example.com") == 200
            await klm.wait_for_reconcile(
                "kcp-system/kyma-a", Trigger.WATCH_EVENT, since=since, timeout=2
            )
            assert len(klm.reconciles(trigger=Trigger.WATCH_EVENT)) == 1
