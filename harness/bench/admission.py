"""Benchmark 1: what the webhook adds to an SKR write, by KCP health and delivery mode.

One environment, two SKRs: ``skr-async`` (our delivery: queue and answer at once) and
``skr-sync`` (upstream-like: the admission waits for the KCP). On each, a *watched* Kyma
(its spec writes pass the webhook) and a *plain* one (the API server never calls the
webhook) are written alternately, so both see the same API server, etcd and machine load
at the same moments. Added latency = write-with-webhook - write-without, compared at p50
and p99. The KCP answers at once, after 100 ms or 2 s (Envoy's fault injection on every
route), or is down (the gateway stopped).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

from harness.bench import webhook_latency
from harness.bench.common import BenchContext
from harness.bench.envkit import SkrWriter, skr_writers
from harness.bench.model import BenchResult, Table, Target, ms
from harness.environment import EnvironmentSpec, SkrSpec, WatcherEnvironment, watcher_environment
from harness.faults import kcp_injection
from harness.report.stats import percentile

WATCHED, PLAIN = "bench-watched", "bench-plain"
STATES: tuple[tuple[str, float | None], ...] = (
    ("answers at once", 0.0),
    ("answers after 100 ms", 0.1),
    ("answers after 2 s", 2.0),
    ("down (gateway stopped)", None),
)
TARGET_MS = 2.0


@dataclass(frozen=True)
class Plan:
    pairs: int
    budget_s: float
    warmup: int = 10


def _plan(quick: bool, mode: str, delay: float | None) -> Plan:
    if mode == "async":
        return Plan(100, 15) if quick else Plan(400, 30)
    if delay == 2.0:
        return Plan(4, 20, warmup=1) if quick else Plan(12, 40, warmup=1)
    if delay == 0.1:
        return Plan(30, 15) if quick else Plan(100, 30)
    if delay is None:
        return Plan(10, 20, warmup=1) if quick else Plan(30, 40, warmup=2)
    return Plan(100, 15) if quick else Plan(400, 30)


async def _pairs(writer: SkrWriter, plan: Plan, tag: str) -> tuple[list[float], list[float]]:
    """Alternating writes (order flipped every pair); seconds per write, warm-up dropped."""
    watched: list[float] = []
    plain: list[float] = []
    deadline = time.monotonic() + plan.budget_s
    for i in range(plan.warmup + plan.pairs):
        if time.monotonic() > deadline:
            break
        order = (WATCHED, PLAIN) if i % 2 == 0 else (PLAIN, WATCHED)
        for name in order:
            took = await writer.timed_patch(name, f"{tag}-{i}")
            if i >= plan.warmup:
                (watched if name == WATCHED else plain).append(took)
    return watched, plain


async def _set_state(env: WatcherEnvironment, delay: float | None) -> None:
    if delay is None:
        await env.gateway.stop()
    elif delay > 0:
        await env.gateway.set_fault(kcp_injection(delay=delay))


async def _clear_state(env: WatcherEnvironment, delay: float | None) -> None:
    if delay is None:
        await env.gateway.start()
    elif delay > 0:
        await env.gateway.set_fault(None)


def _row(mode: str, state: str, watched: list[float], plain: list[float]) -> dict[str, Any]:
    w50, w99 = percentile(watched, 50), percentile(watched, 99)
    p50, p99 = percentile(plain, 50), percentile(plain, 99)
    return {
        "mode": mode,
        "kcp": state,
        "pairs": len(watched),
        "without_webhook_ms": {"p50": ms(p50), "p99": ms(p99)},
        "with_webhook_ms": {"p50": ms(w50), "p99": ms(w99), "max": ms(max(watched))},
        "added_p50_ms": ms(w50 - p50),
        "added_p99_ms": ms(w99 - p99),
    }


def _alone_table(alone: list[dict[str, Any]]) -> Table:
    return Table.of(
        "The webhook alone: POST → answer at an API-server-like client (ms), async, spool on",
        [
            {
                "KCP": r["kcp"],
                "admissions": r["admissions"],
                "per s": r["achieved_per_s"],
                "p50": r["p50_ms"],
                "p99": r["p99_ms"],
                "p99.9": r["p999_ms"],
                "max": r["max_ms"],
                "webhook CPU / admission": r["webhook_cpu_ms_per_admission"],
                "webhook waited for a CPU / admission": r[
                    "webhook_run_queue_wait_ms_per_admission"
                ],
                "events the KCP accepted": r["events_accepted_by_kcp_during_run"],
            }
            for r in alone
        ],
        note=(
            f"CREATE AdmissionReviews paced at {webhook_latency.RATE:g}/s (at most "
            f"{webhook_latency.IN_FLIGHT} in flight, keep-alive HTTPS), each one an event for "
            "the KCP; the first 200 are warm-up. The webhook journals every event in its "
            "durable spool (WATCHER_SPOOL_DIR); the last row also fsyncs before answering "
            "(WATCHER_SPOOL_FSYNC=true, not in the target). 'Waited for a CPU' is the "
            "webhook's run-queue time (/proc/<pid>/schedstat) per admission: latency that "
            "belongs to the machine's load, not to the webhook's code."
        ),
    )


def _alone_target(alone: list[dict[str, Any]]) -> Target:
    judged = [r for r in alone if "fsync" not in r["kcp"]]
    worst = max(judged, key=lambda r: r["p99_ms"])
    met = worst["p99_ms"] <= TARGET_MS
    note = ""
    if not met:
        best = min(judged, key=lambda r: r["p99_ms"])
        note = (
            f"Worst p99 {worst['p99_ms']} ms with the KCP {worst['kcp']}, best "
            f"{best['p99_ms']} ms ({best['kcp']}); p50 stays "
            f"{min(r['p50_ms'] for r in judged)}-{max(r['p50_ms'] for r in judged)} ms. "
            "When the KCP answers, the webhook delivers as many events as it admits, in the "
            "same event loop: an admission that arrives while a delivery callback or a "
            "garbage-collector pass runs waits for it (gen-1 passes take 1-3 ms here). The "
            f"webhook waited {worst['webhook_run_queue_wait_ms_per_admission']} ms per "
            f"admission for a CPU in the worst row (load {worst['load_1min']} on 2 cores). "
            "Tried (docs/performance.md): uvloop, gc.freeze() after start-up, the collector "
            "off - none moved the p99 beyond run-to-run noise on this machine."
        )
    return Target(
        "admission p99 added by the webhook, async, spool on, every KCP state (webhook alone)",
        f"≤ {TARGET_MS:g} ms",
        f"worst {worst['p99_ms']} ms (KCP {worst['kcp']}); p50 "
        f"{max(r['p50_ms'] for r in judged)} ms at most",
        met,
        note,
    )


async def run_admission(ctx: BenchContext) -> BenchResult:
    alone = await webhook_latency.measure(ctx.logs("admission-alone"), quick=ctx.quick)
    spec = EnvironmentSpec(
        skrs=(
            SkrSpec("skr-async", "runtime-async", "skr-async.kyma.example.com"),
            SkrSpec("skr-sync", "runtime-sync", "skr-sync.kyma.example.com", delivery_mode="sync"),
        ),
        log_dir=ctx.logs("admission"),
    )
    rows: list[dict[str, Any]] = []
    async with watcher_environment(spec) as env, skr_writers(env) as writers:
        for writer in writers.values():
            await writer.create_kyma(WATCHED, watched=True)
            await writer.create_kyma(PLAIN, watched=False)
        for state, delay in STATES:
            await _set_state(env, delay)
            try:
                for mode, writer in (
                    ("async", writers["skr-async"]),
                    ("sync", writers["skr-sync"]),
                ):
                    plan = _plan(ctx.quick, mode, delay)
                    watched, plain = await _pairs(writer, plan, f"{mode}-{delay}")
                    row = _row(mode, state, watched, plain)
                    print(f"   {mode:5} KCP {state:24} {row}", flush=True)
                    rows.append(row)
            finally:
                await _clear_state(env, delay)
        settings = {
            "webhook failurePolicy": "Ignore",
            "webhook timeoutSeconds": 15,
            "sync attempts x timeout": "3 x 3 s (WATCHER_SYNC_ATTEMPTS/_TIMEOUT_SECONDS)",
        }
    table = Table.of(
        "SKR write latency with and without the webhook (ms)",
        [
            {
                "delivery": r["mode"],
                "KCP": r["kcp"],
                "pairs": r["pairs"],
                "without p50": r["without_webhook_ms"]["p50"],
                "without p99": r["without_webhook_ms"]["p99"],
                "with p50": r["with_webhook_ms"]["p50"],
                "with p99": r["with_webhook_ms"]["p99"],
                "added p50": r["added_p50_ms"],
                "added p99": r["added_p99_ms"],
            }
            for r in rows
        ],
        note=(
            "A pair = one spec PATCH of a watched Kyma (the API server calls the webhook) "
            "and one of a plain Kyma (no webhook), alternating, on the same SKR API server "
            "over keep-alive HTTPS. Added = with - without at the same percentile."
        ),
    )
    async_rows = [r for r in rows if r["mode"] == "async"]
    worst = max(async_rows, key=lambda r: r["added_p99_ms"])
    met = all(r["added_p99_ms"] <= TARGET_MS for r in async_rows)
    note = ""
    if not met:
        p50s = [r["added_p50_ms"] for r in async_rows]
        load = os.getloadavg()[0]
        spread = max(r["without_webhook_ms"]["p99"] for r in async_rows) - min(
            r["without_webhook_ms"]["p99"] for r in async_rows
        )
        note = (
            f"In async mode the added p50 stays {min(p50s)}-{max(p50s)} ms in every KCP "
            "state, the KCP down included: the KCP is never on the admission path. The p99 "
            "here is a difference of two p99s of an API server and etcd sharing 2 cores "
            f"with everything else (1-minute load {load:.1f} at the end): the writes without "
            f"a webhook alone vary by {spread:.1f} ms in p99 between rows, more than the "
            "webhook costs. The webhook-alone table measures its share directly."
        )
    sync_2s = next((r for r in rows if r["mode"] == "sync" and "2 s" in r["kcp"]), None)
    return BenchResult(
        name="admission",
        title="1. Admission latency vs KCP health (through a real kube-apiserver)",
        description=(
            "First the webhook alone (`harness.bench.webhook_latency`): our `watcher-webhook` "
            "and a KCP stub as processes, this process as the API server, every admission "
            "timed at the client - what the webhook adds to a write, without the API "
            "server's and etcd's own noise. Then through real API servers: "
            "two SKRs in one environment (KCP, Envoy gateway, KLM stand-in): `skr-async` "
            "runs the webhook in our async mode, `skr-sync` in the upstream-like sync mode. "
            "KCP health is changed through the gateway: Envoy fault-injection delays on every "
            "route, or Envoy stopped."
        ),
        tables=(_alone_table(alone), table),
        targets=(
            _alone_target(alone),
            Target(
                "admission p99 added through a real API server, async (difference of p99s)",
                f"≤ {TARGET_MS:g} ms",
                f"worst {worst['added_p99_ms']} ms, KCP {worst['kcp']}"
                + (f"; sync with KCP +2 s: {sync_2s['added_p50_ms']} ms at p50" if sync_2s else ""),
                met,
                note,
            ),
        ),
        figures={
            "rows": rows,
            "settings": settings,
            "webhook_alone": alone,
            "curve_percentiles": list(webhook_latency.CURVE),
        },
    )
