"""Benchmark 8: the fleet — 5,000 Kymas on a real KCP, KLM's queue under events and requeues.

KLM's maintainers aim at 5,000 Kymas by the end of 2026 (klm-reference §1 and §4). A real
KCP API server holds the Kymas; our KLM (with its defaults) and its listener run in this
process behind the real Envoy gateway, wired as :mod:`harness.bench.scale` wires them; one
simulated runtime per Kyma, each with its own client certificate, sends WatchEvents from
:mod:`harness.bench.fleet_load`. The SKR side of a reconcile is not simulated, so reconcile
throughput here is an upper bound for KLM's and reaction times a lower bound. After the
startup wave the first requeues are spread over [0, 5 min), as KLM spreads them after a
ModuleReleaseMeta change, so a few minutes see the steady periodic load. Section 8 of
``docs/benchmarks.md`` lists what is measured; on the kubeconfig backend the KCP's
processes are not ours, so their CPU/RSS are not reported.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import time
from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import aiohttp
from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException

from harness.aio import spawn, stop_tasks
from harness.bench.common import (
    BenchContext,
    cpu_seconds,
    delta,
    each_bounded,
    rss_mib,
    times_by_key,
)
from harness.bench.fleet_load import LoadPlan, send_one
from harness.bench.fleet_plan import (
    DepthSample,
    PlannedEvent,
    SentEvent,
    plan_events,
    reactions,
    request_totals,
    requests_per_second,
    spread_delays,
)
from harness.bench.fleet_report import (
    FULL,
    QUICK,
    FleetConfig,
    FleetRun,
    Window,
    fleet_result,
)
from harness.bench.gatewaykit import (
    MANAGER,
    SERVICE,
    gateway_pki,
    issue_skrs,
    runtime_identity,
    virtual_service,
)
from harness.bench.model import BenchResult, summary
from harness.clusters.backends import open_backend
from harness.clusters.plane import Environment
from harness.clusters.process import OwnedProcess
from harness.clusters.selection import choose_backend
from harness.environment.startup import CRD_DIR
from harness.kcp.gateway.envoy import EnvoyGateway
from harness.kcp.gateway.routes import service_key
from harness.kcp.lifecycle_manager.manager import (
    LifecycleManager,
    Reconcile,
    Trigger,
)
from harness.kube import KYMAS, Conflict, create, ensure_namespace
from harness.kube.crds import apply_crds, wait_creatable
from watcher.domain import KCP_NAMESPACE, RUNTIME_ID_LABEL, SKR_DOMAIN_ANNOTATION
from watcher.listener import ListenerConfig
from watcher.render.envoy import TlsFiles


def kyma_name(i: int) -> str:
    """Kymas are not named after their runtime: KLM must resolve the runtime-id label."""
    return f"kyma-{i:04d}"


def kyma_object(i: int) -> dict[str, Any]:
    rid, domain = runtime_identity(i)
    return {
        "apiVersion": KYMAS.api_version,
        "kind": KYMAS.kind,
        "metadata": {
            "name": kyma_name(i),
            "namespace": KCP_NAMESPACE,
            "labels": {RUNTIME_ID_LABEL: rid},
            "annotations": {SKR_DOMAIN_ANNOTATION: domain},
        },
        "spec": {"channel": "regular"},
    }


async def prepare_kcp(api: ApiClient) -> None:
    """``kcp-system``, the Kyma CRD as the harness installs it, and the first-write wait."""
    await ensure_namespace(api, KCP_NAMESPACE)
    await wait_creatable(api, await apply_crds(api, [CRD_DIR / "kyma.yaml"]))


async def create_kymas(api: ApiClient, n: int, in_flight: int) -> float:
    """Create ``n`` Kymas concurrently; the seconds it took (an existing one counts)."""

    async def one(i: int) -> None:
        with contextlib.suppress(Conflict):  # left by an earlier run on a shared cluster
            await create(api, KYMAS, kyma_object(i))

    started = time.monotonic()
    await each_bounded(range(n), in_flight, one)
    return time.monotonic() - started


class StartupWave:
    """Observes the Reconciler until every Kyma enqueued at startup was reconciled once."""

    def __init__(self) -> None:
        self.expected: int | None = None
        self.seen = 0
        self.done = asyncio.Event()

    def observe(self, record: Reconcile) -> None:
        if Trigger.STARTUP in record.triggers:
            self.seen += 1
        self._check()

    def expect(self, count: int) -> None:
        self.expected = count
        self._check()

    def _check(self) -> None:
        if self.expected is not None and self.seen >= self.expected:
            self.done.set()


async def start_klm(
    stack: AsyncExitStack, api: ApiClient, config: FleetConfig
) -> tuple[LifecycleManager, dict[str, Any]]:
    """KLM with its defaults and an owned listener (XFCC, SAN pinning); returns once the
    startup wave is over, with its figures."""
    listener = ListenerConfig(component=MANAGER, port=0, identity="xfcc")
    klm = LifecycleManager(api, listener_config=listener, pin_san=True, intervals=config.intervals)
    wave = StartupWave()
    klm.reconciler.observers.append(wave.observe)
    started = time.monotonic()
    await stack.enter_async_context(klm)
    synced = time.monotonic() - started
    wave.expect(klm.reconciler.counters["enqueued:startup"])
    async with asyncio.timeout(config.startup_timeout_s):
        await wave.done.wait()
    seconds = time.monotonic() - started
    klm.reconciler.observers.remove(wave.observe)
    return klm, {
        "reconciles": wave.seen,
        "seconds": round(seconds, 2),
        "cache_synced_s": round(synced, 2),
        "per_s": round(wave.seen / seconds, 1),
        "duration_ms": summary([r.duration * 1000 for r in klm.reconciles()]),
    }


async def start_gateway(
    stack: AsyncExitStack, klm: LifecycleManager, tls: TlsFiles, logs: Path
) -> EnvoyGateway:
    """The real Envoy gateway routing KLM's event path to KLM's listener."""
    gateway = await stack.enter_async_context(
        EnvoyGateway(tls, log_dir=logs, name="kcp-gateway-fleet")
    )
    assert klm.host is not None
    await gateway.update([virtual_service()], {service_key(*SERVICE): ("127.0.0.1", klm.host.port)})
    return gateway


async def probe_path(klm: LifecycleManager, plan: LoadPlan, kyma_of: Mapping[str, str]) -> None:
    """One event end to end (Envoy → listener → SAN pinning → KLM → reconcile) before the
    window, so a broken path fails here with a clear message instead of as a bad p99."""
    runtime = next(iter(kyma_of))
    async with aiohttp.ClientSession() as session:
        sent = await send_one(session, plan, PlannedEvent(0.0, runtime, "probe"))
    if not sent.accepted:
        raise RuntimeError(f"probe event through Envoy answered {sent.status} {sent.error}")
    await klm.wait_for_reconcile(kyma_of[runtime], Trigger.WATCH_EVENT, sent.sent, timeout=10.0)


async def kcp_requests(api: ApiClient) -> dict[str, float] | None:
    """kube-apiserver's ``apiserver_request_total`` per verb (None: ``/metrics`` refused)."""
    try:
        response = await api.call_api(
            "/metrics",
            "GET",
            header_params={"Accept": "text/plain"},
            auth_settings=["BearerToken"],
            _preload_content=False,
        )
        async with response:
            text = (await response.read()).decode()
            if response.status != 200:
                return None
    except (ApiException, aiohttp.ClientError, TimeoutError):
        return None
    return request_totals(text)


async def sample_queue(
    klm: LifecycleManager, start: float, every: float, limit: int, out: list[DepthSample]
) -> None:
    """Append the queue's depth every ``every`` seconds (at most ``limit`` samples)."""
    loop = asyncio.get_running_loop()
    reconciler = klm.reconciler
    for _ in range(limit):
        at = round(loop.time() - start, 3)
        out.append(DepthSample(at, reconciler.depth, reconciler.in_progress))
        await asyncio.sleep(every)  # the sampling period


async def read_load(proc: OwnedProcess, within: float) -> tuple[list[SentEvent], dict[str, Any]]:
    """Every event line of the load generator, then its ``done`` line (bounded in time)."""
    events: list[SentEvent] = []
    done: dict[str, Any] = {}
    async with asyncio.timeout(within):
        async for line in proc.stdout:
            data = json.loads(line)
            if "done" in data:
                done = data
            else:
                events.append(SentEvent.from_json(data))
    return events, done


async def drain(
    klm: LifecycleManager, events: Sequence[SentEvent], kyma_of: Mapping[str, str], within: float
) -> None:
    """Until every accepted event's Kyma had a watch-event reconcile after it (or ``within``)."""
    pending: dict[str, float] = {}
    for r in reactions(events, kyma_of, watch_starts(klm)):
        if r.reconciled_at is None:
            pending[r.kyma] = max(pending.get(r.kyma, 0.0), r.event.sent)
    if not pending:
        return
    done = asyncio.Event()

    def observe(record: Reconcile) -> None:
        sent = pending.get(record.kyma)
        if sent is not None and Trigger.WATCH_EVENT in record.triggers and record.at >= sent:
            del pending[record.kyma]
            if not pending:
                done.set()

    klm.reconciler.observers.append(observe)
    try:
        async with asyncio.timeout(within):
            await done.wait()
    except TimeoutError:
        pass  # reported as unreconciled events
    finally:
        klm.reconciler.observers.remove(observe)


def watch_starts(klm: LifecycleManager) -> dict[str, list[float]]:
    """Kyma key → start times of its reconciles with the watch-event trigger, sorted."""
    return times_by_key((r.kyma, r.at) for r in klm.reconciles(trigger=Trigger.WATCH_EVENT))


def _cpu(pids: Mapping[str, int | None]) -> dict[str, float | None]:
    return {name: cpu_seconds(pid) if pid else None for name, pid in pids.items()}


async def measure_window(
    klm: LifecycleManager,
    api: ApiClient,
    plan_file: Path,
    plan: LoadPlan,
    kyma_of: Mapping[str, str],
    pids: Mapping[str, int | None],
    config: FleetConfig,
    logs: Path,
) -> Window:
    """Run the load generator to its end, wait for the last reconciles; what was seen."""
    cpu0, requests0 = _cpu(pids), await kcp_requests(api)
    start, loop_start = time.time(), asyncio.get_running_loop().time()
    samples: list[DepthSample] = []
    limit = int(
        (plan.seconds + config.event_timeout_s + 90 + config.drain_s) / config.sample_every_s
    )
    sampler = spawn(
        sample_queue(klm, loop_start, config.sample_every_s, limit, samples), "fleet-sampler"
    )
    try:
        argv = [sys.executable, "-m", "harness.bench.fleet_load", str(plan_file)]
        async with OwnedProcess(
            "fleet-load", argv, log_path=logs / "fleet-load.log", stdout_pipe=True
        ) as load:
            events, done = await read_load(load, plan.seconds + config.event_timeout_s + 90)
        await drain(klm, events, kyma_of, config.drain_s)
        end = time.time()
    finally:
        await stop_tasks([sampler])
    cpu1, requests1 = _cpu(pids), await kcp_requests(api)
    cpu = {name: delta(cpu0[name], cpu1[name], digits=3) for name in pids}
    return Window(
        start=start,
        end=end,
        events=events,
        load=done,
        samples=samples,
        cpu_s=cpu,
        rss_mib={name: rss_mib(pid) for name, pid in pids.items()},
        requests_per_s=requests_per_second(requests0, requests1, end - start),
        reconciles=[r for r in klm.reconciles(since=start) if r.at <= end],
    )


def component_pids(clusters: Environment, gateway: EnvoyGateway) -> dict[str, int | None]:
    """The processes whose CPU and RSS are reported (the KCP's only when they are ours)."""
    pids: dict[str, int | None] = {
        "KLM + listener + Kyma cache (this process)": os.getpid(),
        "Envoy gateway": gateway.pid,
    }
    pids.update({f"KCP {record.name}": record.pid for record in clusters.processes})
    return pids


def load_plan(config: FleetConfig, gateway: EnvoyGateway, tls: TlsFiles, certs: Path) -> LoadPlan:
    runtimes = [runtime_identity(i)[0] for i in range(config.kymas)]
    return LoadPlan(
        url=f"{gateway.url}/v2/{MANAGER}/event",
        ca_file=tls.ca,
        certs_dir=str(certs),
        events=tuple(plan_events(config.phases(), runtimes, seed=config.seed)),
        timeout_s=config.event_timeout_s,
        max_in_flight=config.send_in_flight,
    )


async def prepare_fleet(
    api: ApiClient, config: FleetConfig, pki_root: Path
) -> tuple[TlsFiles, dict[str, Any]]:
    """The Kymas and the runtimes' certificates; how long each took."""
    await prepare_kcp(api)
    created = await create_kymas(api, config.kymas, config.create_in_flight)
    ca, tls = gateway_pki(pki_root)
    started = time.monotonic()
    await asyncio.to_thread(issue_skrs, ca, pki_root / "skrs", config.kymas)
    issued = time.monotonic() - started
    return tls, {
        "kymas": config.kymas,
        "kymas_created_s": round(created, 2),
        "kymas_per_s": round(config.kymas / created, 1),
        "create_in_flight": config.create_in_flight,
        "certificates_s": round(issued, 2),
        "certificate_ms": round(1000 * issued / config.kymas, 2),
    }


async def measure_fleet(config: FleetConfig, workdir: Path) -> FleetRun:
    """Start everything, run the window, stop everything (also on failure)."""
    logs, pki_root = workdir / "logs", workdir / "pki"
    (pki_root / "skrs").mkdir(parents=True, exist_ok=True)
    choice = choose_backend("local")
    backend = await asyncio.to_thread(
        open_backend, choice, log_dir=logs, namespaces={"kcp": [KCP_NAMESPACE]}
    )
    async with AsyncExitStack() as stack:
        started = time.monotonic()
        clusters = await stack.enter_async_context(backend.start(["kcp"]))
        kcp_ready = time.monotonic() - started
        api = await stack.enter_async_context(clusters["kcp"].api_client())
        tls, setup = await prepare_fleet(api, config, pki_root)
        setup.update(backend=backend.name, kcp_ready_s=round(kcp_ready, 2))
        klm, setup["startup_wave"] = await start_klm(stack, api, config)
        gateway = await start_gateway(stack, klm, tls, logs)
        kyma_of = {
            runtime_identity(i)[0]: f"{KCP_NAMESPACE}/{kyma_name(i)}" for i in range(config.kymas)
        }
        plan = load_plan(config, gateway, tls, pki_root / "skrs")
        plan_file = workdir / "fleet-plan.json"
        plan_file.write_text(plan.to_json())
        await probe_path(klm, plan, kyma_of)
        delays = spread_delays(sorted(kyma_of.values()), config.intervals.success, seed=config.seed)
        for key, delay in delays.items():
            klm.reconciler.requeue_after(key, delay)
        pids = component_pids(clusters, gateway)
        window = await measure_window(klm, api, plan_file, plan, kyma_of, pids, config, logs)
        found = reactions(window.events, kyma_of, watch_starts(klm))
        counters = dict(klm.counters)
    return FleetRun(config, setup, window, found, kyma_of, counters)


async def run_fleet(ctx: BenchContext) -> BenchResult:
    started = time.monotonic()
    config = QUICK if ctx.quick else FULL
    run = await measure_fleet(config, ctx.logs("fleet"))
    return fleet_result(run, time.monotonic() - started)
