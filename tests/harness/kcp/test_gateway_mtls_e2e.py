"""Gateway → listener mTLS in the whole environment: only the gateway's XFCC is believed.

Real KCP/SKR API servers, the real Envoy gateway and the KLM stand-in's listener. The SKR's
events travel SKR → Envoy (downstream mTLS, KCP CA) → listener (upstream mTLS, mesh CA,
SAN pinned); a forger who skips the gateway and talks to the listener port directly with a
forged ``X-Forwarded-Client-Cert`` is refused at the TLS layer or with 403 untrusted-proxy.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import AsyncIterator, Mapping
from pathlib import Path

import aiohttp
import pytest
from cryptography import x509

from harness.environment import (
    KCP_NAMESPACE,
    SKR_NAMESPACE,
    EnvironmentSpec,
    SkrSpec,
    WatcherEnvironment,
    watcher_environment,
)
from harness.kcp.gateway.mesh import GatewayMesh
from harness.kcp.lifecycle_manager.manager import Trigger
from harness.kube import KYMAS, merge_patch
from watcher import pki
from watcher.listener import format_xfcc

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

KLM_HOST = "klm-controller-manager-events.kcp-system.svc.cluster.local"
KLM_CLUSTER = "klm-controller-manager-events_kcp-system_8082"
BODY = (
    b'{"watched":{"Namespace":"kyma-system","Name":"default"},'
    b'"watchedGvk":{"group":"operator.kyma-project.io","version":"v1beta2","kind":"Kyma"}}'
)
FORGED_XFCC = (
    'Hash=x;Cert="-----BEGIN%20CERTIFICATE-----%0Aforged%0A-----END%20CERTIFICATE-----%0A";'
    'Subject="CN=tenant-beta";URI=;DNS=beta.kyma.example.com'
)


@pytest.fixture
async def env() -> AsyncIterator[WatcherEnvironment]:
    spec = EnvironmentSpec(
        skrs=(
            SkrSpec("skr-a", "tenant-alpha", "alpha.kyma.example.com"),
            SkrSpec("skr-b", "tenant-beta", "beta.kyma.example.com"),
        )
    )
    async with watcher_environment(spec) as environment:
        yield environment


def context(ca_file: Path, chain: tuple[Path, Path] | None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(ca_file))
    if chain is not None:
        ctx.load_cert_chain(str(chain[0]), str(chain[1]))
    return ctx


async def post_direct(
    url: str, ssl_context: ssl.SSLContext | bool, headers: Mapping[str, str]
) -> tuple[int | None, str]:
    """(status, body) or (None, why the connection was refused)."""
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as session,
            session.post(url, data=BODY, headers=dict(headers), ssl=ssl_context) as response,
        ):
            return response.status, await response.text()
    except (aiohttp.ClientError, ssl.SSLError, OSError) as exc:
        return None, f"{type(exc).__name__}: {exc}"


def issue_to_files(directory: Path, leaf: pki.Issued) -> tuple[Path, Path]:
    directory.mkdir(parents=True, exist_ok=True)
    files = pki.write_secret_files(directory, pki.secret_data(leaf, b""))
    return files["tls.crt"], files["tls.key"]


async def test_only_the_gateway_may_hand_the_listener_an_xfcc(env: WatcherEnvironment) -> None:
    mesh = env.mesh
    assert isinstance(mesh, GatewayMesh), "the harness gateway must use upstream mTLS by default"
    listener = env.klm.listener
    assert listener is not None and listener.config.xfcc_trust == "gateway-mtls"

    # 1. The rendered KLM cluster speaks TLS 1.3 with the gateway's client certificate and
    #    pins the listener's serving certificate to the Service's DNS name.
    config = env.gateway.config
    assert config is not None
    [klm_cluster] = [c for c in config.clusters if c["name"] == KLM_CLUSTER]
    tls = klm_cluster["transport_socket"]["typed_config"]
    assert tls["sni"] == KLM_HOST
    matchers = tls["common_tls_context"]["validation_context"]["match_typed_subject_alt_names"]
    assert matchers == [{"san_type": "DNS", "matcher": {"exact": KLM_HOST}}]

    # 2. The real flow goes through it: an SKR write reaches KLM over upstream mTLS.
    since = time.time()
    await merge_patch(
        env.skr_apis["skr-a"], KYMAS, "default", SKR_NAMESPACE, {"spec": {"channel": "fast"}}
    )
    async with asyncio.timeout(10):
        while not [
            e
            for e in env.events_since(since, "lifecycle-manager")
            if e.runtime_id == "tenant-alpha"
        ]:
            await asyncio.sleep(0.05)
    stats = await env.gateway.stats()
    assert stats.get(f"cluster.{KLM_CLUSTER}.ssl.handshake", 0) >= 1
    assert stats.get(f"cluster.{KLM_CLUSTER}.upstream_rq_2xx", 0) >= 1

    # 3. Bypassing the gateway with a forged XFCC claiming tenant-beta.
    url = f"https://127.0.0.1:{listener.port}/v2/lifecycle-manager/event"
    forged = {"X-Forwarded-Client-Cert": FORGED_XFCC}
    skr_a = env.fleet["skr-a"].tls
    stranger = issue_to_files(
        env.workdir / "stranger",
        pki.issue(mesh.ca, "other-workload", dns_names=["other.kcp-system.svc"], key_type="ec"),
    )
    attempts = {
        "plain-http": (await post_direct(url.replace("https:", "http:"), False, forged)),
        "no-client-cert": (await post_direct(url, context(mesh.ca_file, None), forged)),
        "skr-certificate": (
            await post_direct(url, context(mesh.ca_file, (skr_a.tls_cert, skr_a.tls_key)), forged)
        ),
        "mesh-cert-not-allow-listed": (
            await post_direct(url, context(mesh.ca_file, stranger), forged)
        ),
    }
    for name in ("plain-http", "no-client-cert", "skr-certificate"):
        status, detail = attempts[name]
        assert status in (None, 400), f"{name}: {status} {detail}"
    status, body = attempts["mesh-cert-not-allow-listed"]
    assert status == 403, body
    assert '"untrusted proxy"' in body and "other-workload" in body
    assert (
        listener.metrics.value(
            "watcher_listener_events_rejected_total", {"reason": "untrusted-proxy"}
        )
        == 1
    )
    forged_events = [e for e in env.events_since(since) if e.runtime_id == "tenant-beta"]
    assert forged_events == []
    assert list(env.klm.reconciles(f"{KCP_NAMESPACE}/kyma-skr-b", Trigger.WATCH_EVENT, since)) == []

    # 4. Positive control: the same request with the gateway's identity is believed, so the
    #    refusals above came from the trust check, not from a broken request.
    gateway_files = (mesh.directory / "gateway" / "tls.crt", mesh.directory / "gateway" / "tls.key")
    valid_xfcc = {"X-Forwarded-Client-Cert": _xfcc_of(env)}
    status, body = await post_direct(url, context(mesh.ca_file, gateway_files), valid_xfcc)
    assert status == 200, body
    assert "tenant-alpha" in body


def _xfcc_of(env: WatcherEnvironment) -> str:
    """An XFCC header as Envoy would set it for skr-a's certificate."""
    cert = x509.load_pem_x509_certificate(env.fleet["skr-a"].tls.tls_cert.read_bytes())
    return format_xfcc(cert)
