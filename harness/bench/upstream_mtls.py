"""What gateway → listener mTLS costs: the same load through Envoy, plain vs mTLS upstream.

``python -m harness.bench.upstream_mtls [--count N]`` starts, per mode, the real listener
in its own process (``harness.bench.kcp_stub``, XFCC identity, SAN pinning on) and a real
Envoy gateway in front of it, then measures from this process:

* ``sequential``: one request at a time (p50/p99 latency of one event);
* ``loaded``: 32 in flight over 8 SKR client certificates (events/s and latencies).

``plain``: the listener believes XFCC from anyone on loopback (the opt-out);
``mtls``: Envoy's cluster presents the gateway's client certificate (mesh CA, TLS 1.3,
listener SAN pinned) and the listener checks it against the allow-list
(``harness.kcp.gateway.mesh``). Modes alternate (plain, mtls, plain, mtls) so drift on a shared
machine hits both. Results are printed as JSON; nothing is written.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import ssl
import tempfile
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import aiohttp

from harness.bench.gatewaykit import (
    MANAGER,
    SERVICE,
    issue_skrs,
    listener_behind_envoy,
    post_events,
    skr_sessions,
    write_domains,
)
from harness.kcp.gateway.mesh import GATEWAY_SPIFFE_ID, GatewayMesh
from watcher import pki
from watcher.render.envoy import ClusterSettings, TlsFiles

SKRS = 8
IN_FLIGHT = 32


async def _post_all(
    url: str, sessions: list[aiohttp.ClientSession], count: int, in_flight: int
) -> dict[str, Any]:
    found = await post_events(url, sessions, count, in_flight=in_flight, budget_s=120)
    if set(found["statuses"]) != {"200"}:
        raise RuntimeError(f"not every event was accepted: {found['statuses']}")
    return {k: found[k] for k in ("events", "events_per_s", "latency_ms")}


async def one_mode(
    mode: str,
    root: Path,
    gateway_tls: TlsFiles,
    mesh: GatewayMesh,
    skrs: list[tuple[str, str, str]],
    count: int,
) -> dict[str, Any]:
    """Start listener + Envoy in ``mode``; measure sequential and loaded requests."""
    listener_args: list[str] = []
    probe_context: ssl.SSLContext | None = None
    settings = ClusterSettings()
    if mode == "mtls":
        cert, key = mesh.issue_listener(MANAGER, SERVICE[:2])
        listener_args += ["--tls-cert", str(cert), "--tls-key", str(key)]
        listener_args += ["--gateway-ca", str(mesh.ca_file)]
        listener_args += ["--trusted-gateway", f"uri:{GATEWAY_SPIFFE_ID}"]
        probe_context = ssl.create_default_context(cafile=str(mesh.ca_file))
        gateway_files = mesh.directory / "gateway"
        probe_context.load_cert_chain(gateway_files / "tls.crt", gateway_files / "tls.key")
        settings = ClusterSettings(upstream_tls=mesh.upstream_tls())
    async with AsyncExitStack() as stack:
        _, gateway = await listener_behind_envoy(
            stack,
            mode,
            domains=root / "domains.json",
            gateway_tls=gateway_tls,
            logs=root,
            listener_args=listener_args,
            probe_ssl=probe_context,
            cluster_settings=settings,
            concurrency=1,
        )
        sessions = await skr_sessions(stack, skrs, gateway_tls.ca, limit=IN_FLIGHT)
        url = f"{gateway.url}/v2/{MANAGER}/event"
        await _post_all(url, sessions, 200, IN_FLIGHT)  # warm-up: every connection opened
        sequential = await _post_all(url, sessions[:1], max(count // 10, 100), 1)
        loaded = await _post_all(url, sessions, count, IN_FLIGHT)
        stats = await gateway.stats()
        [cluster] = gateway.config.clusters if gateway.config is not None else [{}]
        handshakes = stats.get(f"cluster.{cluster.get('name')}.ssl.handshake", 0)
    return {
        "mode": mode,
        "sequential": sequential,
        "loaded": loaded,
        "upstream_tls_handshakes": handshakes,
    }


async def run(count: int, rounds: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-upstream-mtls-") as tmp:
        root = Path(tmp)
        ca = pki.create_ca("kcp-ca", key_type="ec")
        (root / "skrs").mkdir()
        skrs = issue_skrs(ca, root / "skrs", SKRS)
        write_domains(root / "domains.json", skrs)
        server = pki.issue_server_certificate(ca, "kcp-gateway", key_type="ec")
        files = pki.write_secret_files(root, pki.secret_data(server, ca.cert_pem))
        gateway_tls = TlsFiles(str(files["tls.crt"]), str(files["tls.key"]), str(files["ca.crt"]))
        mesh = GatewayMesh.create(root / "mesh")
        results = []
        for _ in range(rounds):
            for mode in ("plain", "mtls"):
                results.append(await one_mode(mode, root, gateway_tls, mesh, skrs, count))
        return {"count": count, "skrs": SKRS, "in_flight": IN_FLIGHT, "runs": results}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m harness.bench.upstream_mtls")
    parser.add_argument("--count", type=int, default=3000, help="events per loaded run")
    parser.add_argument("--rounds", type=int, default=2, help="plain/mtls pairs")
    args = parser.parse_args(argv)
    print(json.dumps(asyncio.run(run(args.count, args.rounds)), indent=2))


if __name__ == "__main__":
    main()
