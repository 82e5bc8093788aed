"""Webhook ↔ KCP on loopback: admission latency by KCP health and mode, events per second.

``python -m harness.bench.loopback [--quick]`` starts, as separate processes, the product's
``watcher-webhook`` and a KCP (``harness.bench.kcp_stub``: the real listener in
direct-mTLS mode, optionally answering late), then measures from this process:

* admission latency (POST /validate → answer) p50/p99 with the KCP answering at once and
  after 2 s, in ``async`` (ours) and ``sync`` (upstream-like) delivery mode;
* events per second webhook → listener: admissions sent with 32 in flight until the
  listener has accepted every event.

Everything runs on 127.0.0.1; every loop is bounded in count and time. Results are
printed and written to ``docs/benchmarks-loopback.md`` and ``.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import ssl
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import asdict, astuple, dataclass
from pathlib import Path
from typing import Any

import aiohttp

from harness.bench.common import each_bounded
from harness.bench.model import Table
from harness.bench.writer import table_markdown
from harness.clusters.ports import free_port
from harness.clusters.probes import http_probe, readyz_probe
from harness.clusters.process import NotReady, OwnedProcess
from harness.report.stats import percentile
from watcher import __version__, pki

DOCS = Path(__file__).resolve().parents[2] / "docs"
BIN = Path(sys.executable).parent
JSON = {"Content-Type": "application/json"}


@dataclass(frozen=True)
class LatencyResult:
    mode: str
    kcp_delay_s: float
    samples: int
    p50_ms: float
    p99_ms: float
    max_ms: float


@dataclass(frozen=True)
class ThroughputResult:
    events: int
    in_flight: int
    seconds: float
    events_per_s: float
    admissions_per_s: float


@dataclass(frozen=True)
class Files:
    skr: dict[str, Path]
    kcp: dict[str, Path]


def make_pki(root: Path, *, rsa_bits: int = 2048) -> Files:
    """A CA, the SKR's certificate and the KCP's, all RSA keys of ``rsa_bits``."""
    ca = pki.create_ca(rsa_bits=rsa_bits)
    (root / "skr").mkdir()
    (root / "kcp").mkdir()
    skr = pki.issue_runtime_certificate(
        ca,
        "runtime-bench",
        "skr.bench.local",
        extra_ip_addresses=["127.0.0.1"],
        extra_dns_names=["localhost"],
        rsa_bits=rsa_bits,
    )
    kcp = pki.issue_server_certificate(ca, "kcp-listener", client_auth=True, rsa_bits=rsa_bits)
    return Files(
        skr=pki.write_secret_files(root / "skr", pki.secret_data(skr, ca.cert_pem)),
        kcp=pki.write_secret_files(root / "kcp", pki.secret_data(kcp, ca.cert_pem)),
    )


def review(i: int) -> dict[str, Any]:
    name = f"bench-{i}"
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": f"uid-{i}",
            "operation": "CREATE",
            "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "name": name,
            "namespace": "default",
            "object": {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": "default"},
                "data": {"k": "v"},
            },
        },
    }


@asynccontextmanager
async def kcp_and_webhook_processes(
    files: Files,
    logs: Path,
    *,
    mode: str,
    delay: float,
    extra_env: dict[str, str] | None = None,
    webhook_argv: list[str] | None = None,
    ours: bool = True,
) -> AsyncIterator[tuple[str, str, OwnedProcess]]:
    """Start the KCP stub and the webhook; yield the webhook URL, the KCP metrics URL and
    the webhook's process (pid, CPU). ``webhook_argv`` replaces the ``watcher-webhook``
    command (e.g. to profile it); ``ours=False``: it is a webhook that is not ours, ready
    when its TLS port answers (only ours serves ``/readyz``)."""
    kcp_port, hook_port, metrics_port = free_port(), free_port(), free_port()
    client = ssl.create_default_context(cafile=str(files.kcp["ca.crt"]))
    client.load_cert_chain(files.skr["tls.crt"], files.skr["tls.key"])
    async with AsyncExitStack() as stack:
        session = await stack.enter_async_context(aiohttp.ClientSession())
        kcp_metrics = f"https://127.0.0.1:{kcp_port}/metrics"
        stub = [sys.executable, "-m", "harness.bench.kcp_stub", "--port", str(kcp_port),
                "--delay", str(delay), "--tls-cert", str(files.kcp["tls.crt"]),
                "--tls-key", str(files.kcp["tls.key"]),
                "--ca-cert", str(files.kcp["ca.crt"])]  # fmt: skip
        await stack.enter_async_context(
            OwnedProcess(
                "kcp-stub",
                stub,
                log_path=logs / f"kcp-{mode}-{delay}.log",
                probe=http_probe(session, kcp_metrics, lambda s, _: s == 200, ssl_context=client),
            )
        )
        foreign = None
        if not ours:
            foreign = ssl.create_default_context(cafile=str(files.skr["ca.crt"]))
        env = {
            **os.environ,
            "WEBHOOK_HOST": "127.0.0.1",
            "WEBHOOK_PORT": str(hook_port),
            "METRICS_HOST": "127.0.0.1",
            "METRICS_PORT": str(metrics_port),
            "CA_CERT": str(files.skr["ca.crt"]),
            "TLS_CERT": str(files.skr["tls.crt"]),
            "TLS_KEY": str(files.skr["tls.key"]),
            "KCP_ADDR": f"127.0.0.1:{kcp_port}",
            "KCP_CONTRACT": "v2",
            "WATCHER_DELIVERY_MODE": mode,
            "WATCHER_LOG_LEVEL": "WARNING",
            **(extra_env or {}),
        }
        webhook = await stack.enter_async_context(
            OwnedProcess(
                "webhook",
                webhook_argv or [str(BIN / "watcher-webhook")],
                env=env,
                log_path=logs / f"webhook-{mode}-{delay}.log",
                probe=(
                    readyz_probe(session, f"http://127.0.0.1:{metrics_port}")
                    if foreign is None
                    else http_probe(
                        session,
                        f"https://127.0.0.1:{hook_port}/",
                        lambda s, _: True,
                        ssl_context=foreign,
                    )
                ),
            )
        )
        yield f"https://127.0.0.1:{hook_port}/validate/lifecycle-manager", kcp_metrics, webhook


@dataclass(frozen=True)
class WebhookClient:
    """This process as the SKR's API server: admissions to the webhook over keep-alive
    HTTPS, and the KCP stub's count of accepted events (its ``/metrics``, mTLS)."""

    session: aiohttp.ClientSession
    url: str
    kcp_metrics: str
    kcp_ssl: ssl.SSLContext

    async def admit(self, body: bytes) -> float:
        """POST one AdmissionReview; milliseconds until the answer (which must be 200)."""
        started = time.perf_counter()
        async with self.session.post(self.url, data=body, headers=JSON) as r:
            await r.read()
            if r.status != 200:
                raise RuntimeError(f"admission answered {r.status}")
        return (time.perf_counter() - started) * 1000

    async def accepted(self) -> int:
        """The KCP stub's ``watcher_listener_events_accepted_total``."""
        async with self.session.get(self.kcp_metrics, ssl=self.kcp_ssl) as r:
            text = await r.text()
        for line in text.splitlines():
            if line.startswith("watcher_listener_events_accepted_total"):
                return int(float(line.split()[-1]))
        raise NotReady("listener metrics lack watcher_listener_events_accepted_total")

    async def accepted_until(
        self, want: int, *, budget_s: float, still_s: float = 2.0, every_s: float = 0.05
    ) -> tuple[int, float]:
        """Poll :meth:`accepted` until it reaches ``want``, stops growing for ``still_s``
        (the webhook's queue may have dropped the oldest events) or ``budget_s`` passed;
        (last count, seconds waited)."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        last, since = -1, started
        while True:
            now = await self.accepted()
            t = loop.time()
            if now >= want or t - started >= budget_s:
                return now, t - started
            if now != last:
                last, since = now, t
            elif t - since >= still_s:
                return now, t - started
            await asyncio.sleep(every_s)  # the count lives in another process


@asynccontextmanager
async def webhook_client(
    files: Files, url: str, kcp_metrics: str, *, in_flight: int = 100
) -> AsyncIterator[WebhookClient]:
    """A :class:`WebhookClient` with at most ``in_flight`` connections to the webhook."""
    kcp_ssl = ssl.create_default_context(cafile=str(files.kcp["ca.crt"]))
    kcp_ssl.load_cert_chain(files.skr["tls.crt"], files.skr["tls.key"])
    ctx = ssl.create_default_context(cafile=str(files.skr["ca.crt"]))
    connector = aiohttp.TCPConnector(ssl=ctx, limit=in_flight)
    async with aiohttp.ClientSession(connector=connector) as session:
        yield WebhookClient(session, url, kcp_metrics, kcp_ssl)


def encoded_review(i: int) -> bytes:
    return json.dumps(review(i)).encode()


async def measure_latency(
    files: Files, logs: Path, *, mode: str, delay: float, samples: int, budget_s: float
) -> LatencyResult:
    async with (
        kcp_and_webhook_processes(files, logs, mode=mode, delay=delay) as (url, kcp_metrics, _),
        webhook_client(files, url, kcp_metrics) as client,
    ):
        for i in range(20):  # warm-up: TLS session, pools, code paths
            await client.admit(encoded_review(-i - 1))
        times: list[float] = []
        deadline = time.monotonic() + budget_s
        for i in range(samples):
            if time.monotonic() > deadline:
                break
            times.append(await client.admit(encoded_review(i)))
    return LatencyResult(
        mode,
        delay,
        len(times),
        round(percentile(times, 50), 3),
        round(percentile(times, 99), 3),
        round(max(times), 3),
    )


async def measure_throughput(
    files: Files, logs: Path, *, events: int, in_flight: int, budget_s: float
) -> ThroughputResult:
    async with (
        kcp_and_webhook_processes(files, logs, mode="async", delay=0.0) as (url, kcp_metrics, _),
        webhook_client(files, url, kcp_metrics, in_flight=in_flight) as client,
    ):
        base = await client.accepted()

        async def admit(i: int) -> None:
            await client.admit(encoded_review(i))

        started = time.perf_counter()
        async with asyncio.timeout(budget_s):
            await each_bounded(range(events), in_flight, admit)
            admitted = time.perf_counter() - started
            while await client.accepted() - base < events:  # noqa: ASYNC110
                await asyncio.sleep(0.01)  # the count lives in another process
        seconds = time.perf_counter() - started
    return ThroughputResult(
        events,
        in_flight,
        round(seconds, 3),
        round(events / seconds, 1),
        round(events / admitted, 1),
    )


def render_markdown(lat: list[LatencyResult], thr: ThroughputResult, meta: dict[str, Any]) -> str:
    latency = Table(
        "Admission latency (POST /validate → answer)",
        ("delivery mode", "KCP answers after", "samples", "p50 ms", "p99 ms", "max ms"),
        tuple(
            (r.mode, f"{r.kcp_delay_s:g} s", r.samples, r.p50_ms, r.p99_ms, r.max_ms) for r in lat
        ),
        "`sync` is upstream's behaviour (the admission waits for the KCP); `async` is ours "
        "(the event is queued and delivered in the background, so the API server never waits "
        "for the KCP).",
    )
    heads = ("events", "admissions in flight", "seconds (until the listener accepted all)")
    events = Table(
        "Events per second, webhook → listener",
        (*heads, "events/s", "admissions/s"),
        (astuple(thr),),
    )
    return "\n".join(
        [
            "# Loopback benchmark: webhook ↔ KCP listener",
            "",
            f"Produced by `{meta['command']}` on {meta['date']} ({meta['cores']} cores, "
            f"Python {meta['python']}, watcher {meta['version']}). Webhook and KCP listener run "
            "as separate processes on 127.0.0.1 with mTLS; the client (this process) plays the "
            "SKR API server. Numbers from a noisy 2-core machine: compare rows, not absolute "
            "values.",
            "",
            *table_markdown(latency),
            *table_markdown(events),
        ]
    )


async def run(quick: bool) -> None:
    samples = 100 if quick else 500
    with tempfile.TemporaryDirectory(prefix="watcher-bench-") as tmp:
        root = Path(tmp)
        files = make_pki(root)
        logs = root / "logs"
        logs.mkdir()
        lat: list[LatencyResult] = []
        for mode in ("async", "sync"):
            for delay in (0.0, 2.0):
                n = samples if (mode == "async" or delay == 0) else (5 if quick else 15)
                result = await measure_latency(
                    files, logs, mode=mode, delay=delay, samples=n, budget_s=60
                )
                print(f"latency {mode:5} kcp+{delay:g}s: {asdict(result)}", flush=True)
                lat.append(result)
        thr = await measure_throughput(
            files, logs, events=1000 if quick else 5000, in_flight=32, budget_s=120
        )
        print(f"throughput: {asdict(thr)}", flush=True)
    meta = {
        "command": "python -m harness.bench.loopback" + (" --quick" if quick else ""),
        "date": time.strftime("%Y-%m-%d"),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "version": __version__,
    }
    DOCS.mkdir(exist_ok=True)
    (DOCS / "benchmarks-loopback.md").write_text(render_markdown(lat, thr, meta))
    (DOCS / "benchmarks-loopback.json").write_text(
        json.dumps(
            {"meta": meta, "latency": [asdict(r) for r in lat], "throughput": asdict(thr)},
            indent=2,
        )
        + "\n"
    )
    print(f"written {DOCS / 'benchmarks-loopback.md'}")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m harness.bench.loopback")
    parser.add_argument("--quick", action="store_true", help="fewer samples (smoke run)")
    asyncio.run(run(parser.parse_args().quick))


if __name__ == "__main__":
    main()
