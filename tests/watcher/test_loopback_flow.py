"""Webhook → mTLS → listener on loopback, with the real pieces on both sides.

The webhook runs in process with upstream-style settings; the listener runs in
direct-mTLS mode (no gateway); certificates come from ``watcher.pki``. These tests are the
product's own end-to-end check before any cluster is involved.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from watcher import pki
from watcher.listener import Listener, ListenerConfig, ListenerEvent, direct_mtls_context
from watcher.model import ObjectKey
from watcher.webhook import Webhook
from watcher.webhook.settings import DeliverySettings, TLSFiles, WebhookSettings


@dataclass
class Pki:
    ca: pki.CertificateAuthority
    skr_dir: Path
    kcp_dir: Path

    def rotate_skr(self, runtime_id: str = "runtime-a") -> None:
        """Re-issue the SKR certificate from a new CA, prepended to the bundle (zero downtime)."""
        new_ca = pki.create_ca(common_name="klm-watcher-selfsigned-ca-2")
        bundle = pki.rotate_ca_bundle((self.skr_dir / "ca.crt").read_bytes(), new_ca.cert_pem)
        leaf = pki.issue_runtime_certificate(
            new_ca, runtime_id, "skr-a.example.com", extra_ip_addresses=["127.0.0.1"]
        )
        pki.write_secret_files(self.skr_dir, pki.secret_data(leaf, bundle))
        # The KCP side trusts both CAs from now on (bundle rotation on the listener).
        pki.write_atomic(self.kcp_dir / "ca.crt", bundle)


@pytest.fixture
def certs(tmp_path: Path) -> Pki:
    ca = pki.create_ca()
    skr, kcp = tmp_path / "skr", tmp_path / "kcp"
    skr.mkdir()
    kcp.mkdir()
    leaf = pki.issue_runtime_certificate(
        ca, "runtime-a", "skr-a.example.com", extra_ip_addresses=["127.0.0.1"]
    )
    pki.write_secret_files(skr, pki.secret_data(leaf, ca.cert_pem))
    server = pki.issue_server_certificate(ca, "kcp-listener")
    pki.write_secret_files(kcp, pki.secret_data(server, ca.cert_pem))
    return Pki(ca, skr, kcp)


def listener_config(certs: Pki, port: int = 0) -> ListenerConfig:
    ctx = direct_mtls_context(
        certs.kcp_dir / "tls.crt", certs.kcp_dir / "tls.key", certs.kcp_dir / "ca.crt"
    )
    return ListenerConfig(
        component="lifecycle-manager",
        port=port,
        ssl_context=ctx,
        identity="direct-mtls",
        buffer_size=1024,
    )


def webhook_settings(certs: Pki, kcp_port: int, **delivery: Any) -> WebhookSettings:
    return WebhookSettings(
        tls=TLSFiles(
            ca_cert=certs.skr_dir / "ca.crt",
            tls_cert=certs.skr_dir / "tls.crt",
            tls_key=certs.skr_dir / "tls.key",
        ),
        kcp_addr=f"127.0.0.1:{kcp_port}",
        kcp_contract="v2",
        host="127.0.0.1",
        port=0,
        metrics_host="127.0.0.1",
        metrics_port=0,
        tls_reload_interval=0.05,
        delivery=replace(DeliverySettings(), retry_base=0.05, retry_max=0.5, **delivery),
    )


def configmap_review(uid: str, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "operation": "CREATE",
            "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "name": name,
            "namespace": "default",
            "object": {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": "default"},
            },
        },
    }


@contextlib.asynccontextmanager
async def admission_client(certs: Pki) -> AsyncIterator[aiohttp.ClientSession]:
    """What the SKR API server does: TLS to the webhook, trusting the CA bundle."""
    ctx = ssl.create_default_context(cafile=str(certs.skr_dir / "ca.crt"))
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx)) as session:
        yield session


async def admit(session: aiohttp.ClientSession, hook: Webhook, review: dict[str, Any]) -> str:
    async with session.post(f"{hook.url}/validate/lifecycle-manager", json=review) as resp:
        assert resp.status == 200
        body = await resp.json()
    assert body["response"]["allowed"] is True
    assert body["response"]["uid"] == review["request"]["uid"]
    return str(body["response"]["status"]["message"])


async def collect(listener: Listener, count: int, within: float) -> list[ListenerEvent]:
    got: list[ListenerEvent] = []

    async def take() -> None:
        async for event in listener.events():
            got.append(event)
            if len(got) == count:
                return

    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(take(), within)
    return got


async def test_every_event_arrives_once_with_the_runtime_id(certs: Pki) -> None:
    names = [f"cm-{i}" for i in range(50)]
    async with Listener(listener_config(certs)) as listener:
        hook = Webhook(webhook_settings(certs, listener.port))
        async with hook, admission_client(certs) as session:
            for i, name in enumerate(names):
                message = await admit(session, hook, configmap_review(f"u{i}", name))
                assert message == "kcp request queued"
            events = await collect(listener, len(names), within=20)
    assert sorted(e.event.watched.name for e in events) == sorted(names)
    assert {e.runtime_id for e in events} == {"runtime-a"}
    assert all(e.event.watched == ObjectKey("default", e.event.watched.name) for e in events)


async def test_sync_mode_answers_like_upstream(certs: Pki) -> None:
    async with Listener(listener_config(certs)) as listener:
        settings = webhook_settings(certs, listener.port, mode="sync")
        async with Webhook(settings) as hook, admission_client(certs) as session:
            consumer = asyncio.create_task(collect(listener, 1, within=20))
            message = await admit(session, hook, configmap_review("u1", "cm-sync"))
            events = await consumer
    assert message == "kcp request succeeded"
    assert [e.event.watched.name for e in events] == ["cm-sync"]


async def test_kcp_outage_admissions_stay_fast_and_nothing_is_lost(certs: Pki) -> None:
    first = Listener(listener_config(certs))
    await first.start()
    port = first.port
    await first.stop()  # the KCP is down from the start
    async with Webhook(webhook_settings(certs, port)) as hook, admission_client(certs) as session:
        slowest = 0.0
        names = [f"outage-{i}" for i in range(20)]
        for i, name in enumerate(names):
            started = time.perf_counter()
            await admit(session, hook, configmap_review(f"u{i}", name))
            slowest = max(slowest, time.perf_counter() - started)
        await asyncio.sleep(3)  # the outage: the KCP stays down for several seconds
        async with Listener(listener_config(certs, port=port)) as listener:
            events = await collect(listener, len(names), within=20)
    assert slowest < 0.5, f"an admission took {slowest:.3f} s while the KCP was down"
    assert sorted(e.event.watched.name for e in events) == sorted(names)


async def test_certificate_rotation_mid_run_loses_nothing(certs: Pki) -> None:
    async with Listener(listener_config(certs)) as listener:
        hook = Webhook(webhook_settings(certs, listener.port))
        async with hook:
            async with admission_client(certs) as session:
                for i in range(10):
                    await admit(session, hook, configmap_review(f"a{i}", f"before-{i}"))
                before = await collect(listener, 10, within=20)
            generation = hook.tls.generation
            certs.rotate_skr()
            # The listener's trust must include the new CA before the SKR uses it.
            listener_ctx = listener.config.ssl_context
            assert listener_ctx is not None
            listener_ctx.load_verify_locations(cafile=str(certs.kcp_dir / "ca.crt"))
            deadline = time.monotonic() + 10
            while hook.tls.generation == generation and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            assert hook.tls.generation > generation, "webhook never reloaded its certificate"
            async with admission_client(certs) as session:  # trusts the rotated bundle
                for i in range(10):
                    await admit(session, hook, configmap_review(f"b{i}", f"after-{i}"))
                after = await collect(listener, 10, within=20)
            failed = hook.metrics.value(
                "watcher_failed_kcp_total", {"error_reason": "failed-request"}
            )
    assert len(before) == 10 and len(after) == 10
    assert failed == 0
    issuers = {e.certificate.issuer.rfc4514_string() for e in after if e.certificate}
    assert issuers == {"CN=klm-watcher-selfsigned-ca-2"}
