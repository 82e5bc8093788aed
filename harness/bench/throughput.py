"""Benchmark 3: AdmissionReviews per second at saturation, and webhook CPU per admission.

The product's ``watcher-webhook`` runs as its own process (async delivery) with a KCP stub
(the real listener in direct-mTLS mode) as another, as in :mod:`harness.bench.loopback`.
This process plays the API server: pre-encoded AdmissionReviews POSTed over keep-alive TLS
with a fixed number in flight, as fast as the webhook answers. CPU seconds of the webhook
process are read from ``/proc/<pid>/stat`` (utime + stime) before and after - after the
listener accepted every event, so event delivery is included. Two workloads: CREATEs (each
one an event to the KCP) and UPDATEs with an unchanged spec (decided, no event).
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import shlex
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.bench.common import BenchContext, cpu_seconds, each_bounded, own_cpu_seconds
from harness.bench.loopback import (
    WebhookClient,
    kcp_and_webhook_processes,
    make_pki,
    review,
    webhook_client,
)
from harness.bench.model import BenchResult, Table, Target
from harness.bench.profiled import Profile
from harness.clusters.selection import ENV_WEBHOOK_COMMAND

TARGET_CREATE_PER_S = 5000
TARGET_UPDATE_PER_S = 10_000
IN_FLIGHT = 32


def _unchanged_update(i: int) -> dict[str, Any]:
    """An UPDATE whose spec did not change: decided, answered, no event. (An object without
    ``spec`` would be an event: upstream sends one when it cannot compare specs.)"""
    body = review(i)
    request = body["request"]
    request["operation"] = "UPDATE"
    request["object"]["spec"] = {"channel": "regular", "modules": [{"name": "api-gateway"}]}
    request["oldObject"] = request["object"]
    return body


async def _saturate(client: WebhookClient, bodies: list[bytes], budget_s: float) -> float:
    """POST ``bodies`` with :data:`IN_FLIGHT` workers; the seconds it took."""
    started = time.perf_counter()
    async with asyncio.timeout(budget_s):
        await each_bounded(bodies, IN_FLIGHT, client.admit)
    return time.perf_counter() - started


@dataclass(frozen=True)
class Variant:
    """One measured configuration: which webhook, which workload, which certificates."""

    key: str
    label: str
    kind: str  # "create" (one event each) or "update-unchanged" (no event)
    count: int
    rsa_bits: int = 2048
    env: tuple[tuple[str, str], ...] = ()
    argv: tuple[str, ...] | None = None  # None: our watcher-webhook
    ours: bool = True


UPSTREAM_LIKE = (("WATCHER_KEEPALIVE_SECONDS", "0"),)
"""Our webhook with a new connection and TLS handshake per event, as upstream delivers."""
FLOOR_ARGV = (sys.executable, "-m", "harness.bench.floor_server")


def variants(quick: bool, foreign: str | None) -> tuple[Variant, ...]:
    """What the benchmark runs; ``foreign``: a ``--webhook-command`` to measure as well."""
    n = 3000 if quick else 8000  # below the webhook's queue size (10,000)
    few = 1000 if quick else 2000  # a TLS handshake per event costs ~1-5 ms
    found = [
        Variant("create", "CREATE, event delivered - ours (pooled connections)", "create", n),
        Variant(
            "create-upstream-like",
            "CREATE, event delivered - a new connection per event (upstream-like)",
            "create",
            few,
            env=UPSTREAM_LIKE,
        ),
        Variant("create-rsa4096", "CREATE - ours, RSA-4096 certificates", "create", n, 4096),
        Variant(
            "create-upstream-like-rsa4096",
            "CREATE - upstream-like, RSA-4096 certificates",
            "create",
            few // 2,
            4096,
            env=UPSTREAM_LIKE,
        ),
        Variant(
            "update-unchanged", "UPDATE, spec unchanged (no event) - ours", "update-unchanged", n
        ),
        Variant(
            "floor",
            "UPDATE - floor: aiohttp + TLS + JSON only (harness.bench.floor_server)",
            "update-unchanged",
            n,
            argv=FLOOR_ARGV,
            ours=False,
        ),
    ]
    if foreign:
        argv = tuple(shlex.split(foreign))
        found += [
            Variant("foreign-create", f"CREATE - {foreign}", "create", few, argv=argv, ours=False),
            Variant(
                "foreign-update",
                f"UPDATE - {foreign}",
                "update-unchanged",
                n,
                argv=argv,
                ours=False,
            ),
        ]
    return tuple(found)


async def _workload(
    root: Path, logs: Path, variant: Variant, *, budget_s: float, profile: Path | None = None
) -> dict[str, Any]:
    workdir = root / (variant.key if profile is None else f"{variant.key}-profiled")
    workdir.mkdir()
    files = make_pki(workdir, rsa_bits=variant.rsa_bits)
    argv = list(variant.argv) if variant.argv is not None else None
    if profile is not None:
        argv = [
            sys.executable,
            "-m",
            "harness.bench.profiled",
            str(profile),
            "watcher.webhook.server:main",
        ]
    maker = review if variant.kind == "create" else _unchanged_update
    bodies = [json.dumps(maker(i)).encode() for i in range(variant.count)]
    warm = [json.dumps(maker(-i - 1)).encode() for i in range(200)]
    async with kcp_and_webhook_processes(
        files,
        logs,
        mode="async",
        delay=0.0,
        webhook_argv=argv,
        extra_env=dict(variant.env),
        ours=variant.ours,
    ) as (url, kcp_metrics, webhook):
        assert webhook.pid is not None
        async with webhook_client(files, url, kcp_metrics, in_flight=IN_FLIGHT) as client:
            await _saturate(client, warm, budget_s)
            base_events = await client.accepted()
            cpu0, own0 = cpu_seconds(webhook.pid) or 0.0, own_cpu_seconds()
            seconds = await _saturate(client, bodies, budget_s)
            answered = len(bodies)
            delivered = 0
            if variant.kind == "create":
                async with asyncio.timeout(budget_s):
                    found, _ = await client.accepted_until(
                        base_events + answered, budget_s=math.inf, still_s=1.0, every_s=0.02
                    )
                    delivered = found - base_events
            cpu1, own1 = cpu_seconds(webhook.pid) or 0.0, own_cpu_seconds()
    cpu = cpu1 - cpu0
    return {
        "variant": variant.key,
        "label": variant.label,
        "workload": variant.kind,
        "rsa_bits": variant.rsa_bits,
        "admissions": answered,
        "in_flight": IN_FLIGHT,
        "seconds": round(seconds, 3),
        "admissions_per_s": round(answered / seconds, 1),
        "events_delivered": delivered,
        "webhook_cpu_s": round(cpu, 2),
        "webhook_cpu_s_per_1000": round(1000 * cpu / answered, 3),
        "one_core_capacity_per_s": round(answered / cpu, 0) if cpu else None,
        "client_cpu_s": round(own1 - own0, 2),
        "webhook_core_utilisation": round(cpu / seconds, 2),
    }


def _by_key(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["variant"]: r for r in rows}


def _targets(
    rows: list[dict[str, Any]], packages: list[tuple[str, float, float]]
) -> tuple[Target, ...]:
    """The two per-CPU-second targets, each with the floor and the upstream-like row as
    context: a miss below the floor names the stack, not the webhook's code."""
    found = _by_key(rows)
    create, update, floor = found["create"], found["update-unchanged"], found["floor"]
    upstream = found.get("create-upstream-like")
    c_cap = create["one_core_capacity_per_s"] or 0.0
    u_cap = update["one_core_capacity_per_s"] or 0.0
    f_cap = floor["one_core_capacity_per_s"] or 0.0
    shares = ", ".join(f"{name} {share:.0%}" for name, _, share in packages[:4])
    ratio = ""
    if upstream and upstream["webhook_cpu_s_per_1000"]:
        per_1000 = upstream["webhook_cpu_s_per_1000"]
        times = per_1000 / create["webhook_cpu_s_per_1000"]
        ratio = (
            f" A new connection per event (upstream-like) costs {per_1000} CPU s per 1,000, "
            f"{times:.1f}x ours."
        )
    bound = 1000 / (2 * floor["webhook_cpu_s_per_1000"])
    create_note = (
        f"Per CREATE the webhook spends {create['webhook_cpu_s_per_1000']} ms of CPU: answering "
        f"the admission (an UPDATE without event costs {update['webhook_cpu_s_per_1000']} ms) "
        "plus one HTTPS POST to the KCP on a pooled connection. The floor row - an aiohttp TLS "
        f"server that only decodes and answers - costs {floor['webhook_cpu_s_per_1000']} ms per "
        "admission on this machine, and an aiohttp client POST costs about as much again, so "
        f"one event per request over HTTP/1.1 in Python bounds this near {bound:,.0f}/s. "
        f"Profile by package: {shares}.{ratio} Tried (docs/performance.md): uvloop (no gain on "
        "this machine: its TLS transport is not cheaper than asyncio's), a lean client session "
        "(no cookie jar, shared timeout objects) and a C fast path for unchanged specs (kept). "
        "What would lift it further breaks the wire (several events per request) or needs "
        "HTTP/2 to the gateway, which aiohttp's client does not speak."
    )
    update_note = (
        f"Ours {update['webhook_cpu_s_per_1000']} ms per UPDATE against the floor's "
        f"{floor['webhook_cpu_s_per_1000']} ms ({f_cap:,.0f}/s): validation, the decision, "
        "metrics and logging add the difference. 10,000/s per core means 0.1 ms per admission "
        "including TLS, which the stack alone does not reach here."
    )
    return (
        Target(
            "webhook CREATEs with events per webhook CPU-second",
            f"≥ {TARGET_CREATE_PER_S:,}/s",
            f"{c_cap:,.0f}/s ({create['webhook_cpu_s_per_1000']} CPU s per 1,000; "
            f"{create['admissions_per_s']:,.0f}/s wall on the shared 2 cores)",
            c_cap >= TARGET_CREATE_PER_S,
            create_note,
        ),
        Target(
            "webhook UPDATEs without event per webhook CPU-second",
            f"≥ {TARGET_UPDATE_PER_S:,}/s",
            f"{u_cap:,.0f}/s (floor of the HTTP stack: {f_cap:,.0f}/s)",
            u_cap >= TARGET_UPDATE_PER_S,
            update_note,
        ),
    )


async def run_throughput(ctx: BenchContext) -> BenchResult:
    foreign = os.environ.get(ENV_WEBHOOK_COMMAND, "").strip() or None
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-throughput-") as tmp:
        for variant in variants(ctx.quick, foreign):
            row = await _workload(Path(tmp), ctx.logs("throughput"), variant, budget_s=60)
            print(
                f"   {variant.key}: {row['webhook_cpu_s_per_1000']} CPU s / 1,000, "
                f"{row['admissions_per_s']:,.0f}/s wall",
                flush=True,
            )
            rows.append(row)
        profile = Path(tmp) / "webhook.prof"
        await _workload(
            Path(tmp),
            ctx.logs("throughput"),
            Variant("create", "profiled", "create", 3000),
            budget_s=60,
            profile=profile,
        )
        prof = Profile.read(profile)
    profile_table = prof.table(
        f"Where the webhook's CPU goes (cProfile, 3,000 CREATEs; {prof.total:.2f} s profiled)",
        "cProfile slows the process down; read the shares, not the absolute times. "
        "The webhook runs two HTTP stacks per event: the aiohttp server answering the "
        "admission and the aiohttp client delivering the event over mTLS.",
    )
    table = Table.of(
        f"Admissions at saturation ({IN_FLIGHT} in flight, keep-alive TLS from the client)",
        [
            {
                "webhook and workload": r["label"],
                "admissions": r["admissions"],
                "events delivered": (
                    r["events_delivered"] if r["workload"] == "create" else "none sent"
                ),
                "admissions/s": r["admissions_per_s"],
                "webhook CPU s / 1,000": r["webhook_cpu_s_per_1000"],
                "per webhook CPU-second": r["one_core_capacity_per_s"],
                "webhook cores used": r["webhook_core_utilisation"],
                "client CPU s": r["client_cpu_s"],
            }
            for r in rows
        ],
        note=(
            "Admissions/s is what the webhook answered with the client on the same 2 cores; "
            "'per webhook CPU-second' = admissions / webhook CPU seconds (utime + stime of its "
            "process, read after the KCP stub accepted every event), the rate one core would "
            "sustain if the webhook had it to itself. Certificates RSA-2048 unless the row "
            f"says otherwise. A webhook command that is not ours is measured too when "
            f"{ENV_WEBHOOK_COMMAND} is set."
        ),
    )
    return BenchResult(
        name="throughput",
        title="3. Webhook throughput",
        description=(
            "`watcher-webhook` and a KCP stub as separate processes on 127.0.0.1 with mTLS; "
            "this process posts AdmissionReviews like an API server would."
        ),
        tables=(table, profile_table),
        targets=_targets(rows, prof.packages),
        figures={
            "rows": rows,
            "profile_total_s": round(prof.total, 3),
            "profile_by_package": prof.by_package_json(),
            "profile_top": prof.top_json(),
        },
    )
