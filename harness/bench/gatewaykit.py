"""Envoy in front of KLM's listener for many SKR identities (the scale and fleet benchmarks).

Both benchmarks put the real gateway (:class:`~harness.kcp.gateway.envoy.EnvoyGateway`,
mTLS with the KCP CA, XFCC ``SANITIZE_SET``) in front of a listener and talk to it as
many simulated SKRs, each with its own client certificate. What they share: the KCP CA
and the gateway's serving certificate, KLM's VirtualService for ``klm-watcher``, and the
runtimes' identities (runtime id ↔ SKR domain, one EC certificate each).
"""

from __future__ import annotations

import asyncio
import json
import ssl
import sys
import time
from collections.abc import Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import aiohttp

from harness.bench.common import each_bounded
from harness.bench.model import summary
from harness.clusters.ports import free_port
from harness.clusters.probes import http_probe
from harness.clusters.process import OwnedProcess
from harness.kcp.gateway.envoy import EnvoyGateway
from harness.kcp.gateway.routes import service_key
from watcher import pki
from watcher.model import GroupVersionKind, ObjectKey, WatchEvent, encode_event
from watcher.render.envoy import ClusterSettings, TlsFiles

MANAGER = "lifecycle-manager"
SERVICE = ("klm-controller-manager-events", "kcp-system", 8082)
EVENT = encode_event(
    WatchEvent(
        ObjectKey("kyma-system", "default"),
        GroupVersionKind("operator.kyma-project.io", "v1beta2", "Kyma"),
    )
)
"""The bytes our webhook (and upstream's) sends for a Kyma change."""


def virtual_service() -> dict[str, Any]:
    """KLM's VirtualService for ``klm-watcher`` (as ``watcher.render`` would produce)."""
    name, namespace, port = SERVICE
    return {
        "apiVersion": "networking.istio.io/v1beta1",
        "kind": "VirtualService",
        "metadata": {"name": "klm-watcher", "namespace": namespace},
        "spec": {
            "gateways": [f"{namespace}/klm-watcher"],
            "hosts": ["listener.kyma.local"],
            "http": [
                {
                    "name": f"{namespace}/klm-watcher",
                    "match": [{"uri": {"prefix": f"/v2/{MANAGER}/event"}}],
                    "route": [
                        {
                            "destination": {
                                "host": f"{name}.{namespace}.svc.cluster.local",
                                "port": {"number": port},
                            }
                        }
                    ],
                }
            ],
        },
    }


def write_file(path: Path, data: bytes) -> str:
    """Write ``data`` atomically (private file); the path as a string, as TLS APIs take it."""
    pki.write_atomic(path, data)
    return str(path)


def runtime_identity(i: int) -> tuple[str, str]:
    """The ``i``-th simulated runtime: (runtime id, SKR domain)."""
    return f"runtime-{i:04d}", f"skr-{i:04d}.kyma.example.com"


def issue_skrs(ca: pki.CertificateAuthority, root: Path, n: int) -> list[tuple[str, str, str]]:
    """``n`` runtime certificates (EC keys; CN = runtime id, DNS SAN = its SKR domain):
    (runtime id, cert file, key file), files named after the runtime id in ``root``."""
    out = []
    for i in range(n):
        rid, domain = runtime_identity(i)
        leaf = pki.issue_runtime_certificate(ca, rid, domain, key_type="ec")
        out.append(
            (
                rid,
                write_file(root / f"{rid}.crt", leaf.cert_pem),
                write_file(root / f"{rid}.key", leaf.key_pem),
            )
        )
    return out


def gateway_pki(root: Path) -> tuple[pki.CertificateAuthority, TlsFiles]:
    """A KCP CA (EC) and the gateway's serving certificate from it, written to ``root``."""
    ca = pki.create_ca("kcp-ca", key_type="ec")
    server = pki.issue_server_certificate(ca, "kcp-gateway", key_type="ec")
    return ca, TlsFiles(
        cert_chain=write_file(root / "gw.crt", server.cert_pem),
        private_key=write_file(root / "gw.key", server.key_pem),
        ca=write_file(root / "ca.crt", ca.cert_pem),
    )


async def skr_sessions(
    stack: AsyncExitStack, skrs: Sequence[tuple[str, str, str]], ca_file: str, *, limit: int
) -> list[aiohttp.ClientSession]:
    """One keep-alive client per SKR of :func:`issue_skrs` (its own certificate, at most
    ``limit`` connections), closed with ``stack``."""
    sessions = []
    for _, cert, key in skrs:
        context = ssl.create_default_context(cafile=ca_file)
        context.load_cert_chain(cert, key)
        sessions.append(
            await stack.enter_async_context(
                aiohttp.ClientSession(
                    connector=aiohttp.TCPConnector(ssl=context, limit=limit),
                    timeout=aiohttp.ClientTimeout(total=30),
                )
            )
        )
    return sessions


async def post_events(
    url: str,
    sessions: Sequence[aiohttp.ClientSession],
    count: int,
    *,
    in_flight: int,
    budget_s: float,
) -> dict[str, Any]:
    """POST :data:`EVENT` ``count`` times round-robin over ``sessions``, ``in_flight`` at a
    time: events, seconds, events/s, latency (ms, POST → answer) and answers by status."""
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    headers = {"Content-Type": "application/json"}

    async def post(i: int) -> None:
        started = time.perf_counter()
        async with sessions[i % len(sessions)].post(url, data=EVENT, headers=headers) as r:
            await r.read()
        latencies.append((time.perf_counter() - started) * 1000)
        statuses[r.status] = statuses.get(r.status, 0) + 1

    started = time.perf_counter()
    async with asyncio.timeout(budget_s):
        await each_bounded(range(count), in_flight, post)
    seconds = time.perf_counter() - started
    return {
        "events": len(latencies),
        "seconds": round(seconds, 3),
        "events_per_s": round(len(latencies) / seconds, 1),
        "latency_ms": summary(latencies),
        "statuses": {str(k): v for k, v in sorted(statuses.items())},
    }


def write_domains(path: Path, skrs: Sequence[tuple[str, str, str]]) -> Path:
    """The listener's ``--domains`` file for :func:`issue_skrs`'s runtimes (id → SKR domain)."""
    path.write_text(
        json.dumps(
            {rid: f"skr-{rid.removeprefix('runtime-')}.kyma.example.com" for rid, *_ in skrs}
        )
    )
    return path


async def listener_behind_envoy(
    stack: AsyncExitStack,
    tag: str,
    *,
    domains: Path,
    gateway_tls: TlsFiles,
    logs: Path,
    stub: Sequence[str] = ("-m", "harness.bench.kcp_stub"),
    listener_args: Sequence[str] = (),
    probe_ssl: ssl.SSLContext | None = None,
    cluster_settings: ClusterSettings = ClusterSettings(),  # noqa: B008 - frozen
    concurrency: int | None = None,
) -> tuple[OwnedProcess, EnvoyGateway]:
    """KLM's listener in its own process (:mod:`harness.bench.kcp_stub`: XFCC identity, SAN
    pinning against ``domains``; ``stub`` may wrap it, e.g. in the profiler) behind the
    real Envoy gateway routing KLM's event path to it; both stop with ``stack``.
    ``probe_ssl``: the listener serves TLS (its ``/metrics`` is probed with it)."""
    port = free_port()
    session = await stack.enter_async_context(aiohttp.ClientSession())
    metrics = f"{'http' if probe_ssl is None else 'https'}://127.0.0.1:{port}/metrics"
    argv = [sys.executable, *stub, "--port", str(port), "--component", MANAGER,
            "--identity", "xfcc", "--domains", str(domains), *listener_args]  # fmt: skip
    listener = await stack.enter_async_context(
        OwnedProcess(
            f"listener-{tag}",
            argv,
            log_path=logs / f"listener-{tag}.log",
            probe=http_probe(session, metrics, lambda s, _: s == 200, ssl_context=probe_ssl),
        )
    )
    gateway = await stack.enter_async_context(
        EnvoyGateway(
            gateway_tls,
            log_dir=logs,
            name=f"kcp-gateway-{tag}",
            cluster_settings=cluster_settings,
            concurrency=concurrency,
        )
    )
    await gateway.update([virtual_service()], {service_key(*SERVICE): ("127.0.0.1", port)})
    return listener, gateway
