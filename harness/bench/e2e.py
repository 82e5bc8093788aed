"""Benchmark 2: SKR API write → event at the KCP listener → reconcile start, by write rate.

One environment with 3 SKRs (async delivery), each holding ``OBJECTS`` watched Kymas.
Writes are spec PATCHes paced at 10, 50 and 200 per second, spread round-robin over the
SKRs and their Kymas, through each SKR's kube-apiserver (admission → webhook → Envoy with
mTLS → the KLM stand-in's listener). Per write: the first event for that runtime and Kyma
the listener accepted after the write was sent (``env.events``), and the first reconcile
of the SKR's KCP Kyma that started after that event (``env.klm.reconciles()``). A write
coalesced into an event already pending is matched to that event, which is what told the
KCP. The achieved rate is reported next to the requested one.
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass
from typing import Any

from harness.bench.common import (
    BenchContext,
    first_at_or_after,
    own_cpu_seconds,
    paced,
    times_by_key,
)
from harness.bench.envkit import SkrWriter, skr_writers
from harness.bench.model import BenchResult, Cell, Table, Target, summary
from harness.environment import (
    KCP_NAMESPACE,
    EnvironmentSpec,
    SkrSpec,
    WatcherEnvironment,
    watcher_environment,
)

OBJECTS = 40
RATES = (10, 50, 200)
TARGET_RATE, TARGET_P99_MS = 50, 250.0


@dataclass(frozen=True)
class Write:
    skr: str
    runtime_id: str
    kyma: str
    sent: float


def _match(env: WatcherEnvironment, writes: list[Write]) -> tuple[list[float], list[float], int]:
    """(write → listener ms, write → reconcile-start ms, writes with no event)."""
    events = times_by_key(
        ((e.runtime_id, e.name), e.received_at)
        for e in env.events
        if e.manager == "lifecycle-manager"
    )
    starts: dict[str, list[float]] = {}
    to_listener: list[float] = []
    to_reconcile: list[float] = []
    missing = 0
    for w in writes:
        received = first_at_or_after(events.get((w.runtime_id, w.kyma), []), w.sent)
        if received is None:
            missing += 1
            continue
        to_listener.append((received - w.sent) * 1000)
        key = f"{KCP_NAMESPACE}/kyma-{w.skr}"
        if key not in starts:
            starts[key] = sorted(r.at for r in env.klm.reconciles(key))
        start = first_at_or_after(starts[key], received)
        if start is not None:
            to_reconcile.append((start - w.sent) * 1000)
    return to_listener, to_reconcile, missing


async def _settle(env: WatcherEnvironment, writes: list[Write], within: float) -> None:
    """Until every write has an event, or nothing new arrived for 1 s, or ``within``."""
    deadline = time.monotonic() + within
    seen, quiet_since = len(env.events), time.monotonic()
    while time.monotonic() < deadline:
        if _match(env, writes)[2] == 0:
            await asyncio.sleep(0.2)  # let the last reconciles start
            return
        await asyncio.sleep(0.1)  # polling the event log until the deadline
        if len(env.events) != seen:
            seen, quiet_since = len(env.events), time.monotonic()
        elif time.monotonic() - quiet_since > 1.0:
            return


async def _run_rate(
    env: WatcherEnvironment, writers: dict[str, SkrWriter], rate: int, duration: float
) -> dict[str, Any]:
    names = sorted(writers)
    writes: list[Write] = []

    async def write(i: int) -> None:
        writer = writers[names[i % len(names)]]
        kyma = f"bench-{(i // len(names)) % OBJECTS}"
        sent = await writer.patch_spec(kyma, f"{rate}-{i}")
        writes.append(Write(writer.name, writer.runtime_id, kyma, sent))

    cpu0 = own_cpu_seconds()
    started, seconds = await paced(
        rate, count=int(rate * duration), duration=duration * 1.5, action=write
    )
    bench_cpu = (own_cpu_seconds() - cpu0) / seconds
    load = os.getloadavg()[0]
    await _settle(env, writes, within=15.0)
    listener, reconcile, missing = _match(env, writes)
    return {
        "target_rate": rate,
        "writes": started,
        "achieved_rate": round(started / seconds, 1),
        "seconds": round(seconds, 2),
        "listener": summary(listener),
        "reconcile": summary(reconcile),
        "writes_without_event": missing,
        "reconciles_total": len(env.klm.reconciles()),
        "bench_process_cores": round(bench_cpu, 2),
        "load_1min": round(load, 2),
        "_reconcile_samples_s": [round(v / 1000, 4) for v in reconcile],
    }


async def run_e2e(ctx: BenchContext) -> BenchResult:
    duration = 5.0 if ctx.quick else 12.0
    spec = EnvironmentSpec(
        skrs=tuple(SkrSpec(f"skr-{c}", f"runtime-{c}", f"skr-{c}.kyma.example.com") for c in "abc"),
        log_dir=ctx.logs("e2e"),
    )
    rows: list[dict[str, Any]] = []
    async with watcher_environment(spec) as env, skr_writers(env) as writers:
        await asyncio.gather(
            *(
                w.create_kyma(f"bench-{i}", watched=True)
                for w in writers.values()
                for i in range(OBJECTS)
            )
        )
        await asyncio.sleep(1.0)  # let the creates' events and reconciles pass
        for rate in RATES:
            row = await _run_rate(env, writers, rate, duration)
            printable = {k: v for k, v in row.items() if not k.startswith("_")}
            print(f"   {rate:4} w/s: {printable}", flush=True)
            rows.append(row)
    low = rows[0]
    ctx.shared["e2e_delays_s"] = tuple(low.pop("_reconcile_samples_s"))
    ctx.shared["e2e_delays_source"] = (
        f"write → reconcile start measured at {low['target_rate']} writes/s in benchmark 2"
    )
    for row in rows[1:]:
        row.pop("_reconcile_samples_s")
    table_rows: list[tuple[Cell, ...]] = [
        (
            r["target_rate"],
            r["achieved_rate"],
            r["writes"],
            r["listener"].get("p50"),
            r["listener"].get("p99"),
            r["listener"].get("max"),
            r["reconcile"].get("p50"),
            r["reconcile"].get("p99"),
            r["reconcile"].get("max"),
            r["writes_without_event"],
        )
        for r in rows
    ]
    table = Table(
        "Write → listener → reconcile start (ms)",
        (
            "writes/s wanted",
            "achieved",
            "writes",
            "→ listener p50",
            "p99",
            "max",
            "→ reconcile p50",
            "p99",
            "max",
            "no event",
        ),
        tuple(table_rows),
        note=(
            f"3 SKRs x {OBJECTS} watched Kymas, writes round-robin, at most 64 in flight; "
            f"{duration:g} s per rate. Times are wall-clock (`time.time()`) in one machine: "
            "write sent (bench) → event accepted (listener) → reconcile started (KLM)."
        ),
    )
    at_target = next(r for r in rows if r["target_rate"] == TARGET_RATE)
    p99 = at_target["reconcile"].get("p99")
    top = rows[-1]
    notes = []
    if top["achieved_rate"] < 0.9 * top["target_rate"]:
        notes.append(
            f"{top['target_rate']} writes/s was not reached: {top['achieved_rate']} achieved "
            "with 64 writes in flight — the 2 cores are shared by 4 API servers, etcd, Envoy, "
            "3 webhooks and this process."
        )
    if (top["reconcile"].get("p99") or 0) > 4 * (at_target["reconcile"].get("p99") or 1):
        notes.append(
            f"At {top['achieved_rate']} writes/s the machine is saturated: 1-minute load "
            f"{top['load_1min']} on {os.cpu_count()} cores; this process alone (load "
            "generator, KLM listener and reconciler, gateway sync) used "
            f"{top['bench_process_cores']} cores. Latency then grows by queueing (webhook "
            "delivery queues, listener backlog), not by a fixed per-event cost; the "
            f"{TARGET_RATE} writes/s row shows the unsaturated path."
        )
    return BenchResult(
        name="e2e",
        title="2. End-to-end latency (SKR write → listener → reconcile)",
        description=(
            "KCP + 3 SKRs, Envoy gateway with mTLS and XFCC, KLM stand-in with SAN pinning; "
            "webhooks in async mode."
        ),
        tables=(table,),
        targets=(
            Target(
                f"end-to-end p99 at {TARGET_RATE} writes/s (write → reconcile start)",
                f"≤ {TARGET_P99_MS:g} ms",
                f"{p99} ms (achieved {at_target['achieved_rate']} writes/s)",
                p99 is not None and p99 <= TARGET_P99_MS,
            ),
        ),
        figures={"rates": rows, "objects_per_skr": OBJECTS, "seconds_per_rate": duration},
        notes=tuple(notes),
    )
