"""What the webhook's durable spool costs and what it saves (not part of ``make bench``).

``python -m harness.bench.spool latency [--samples N]`` starts ``watcher-webhook`` and the
KCP stub (as :mod:`harness.bench.loopback` does) three times — spool off, spool on
(``write()`` only), spool on with ``WATCHER_SPOOL_FSYNC`` — and measures admission latency
p50/p99 one request at a time and with 32 in flight.

``python -m harness.bench.spool loss [--runs N] [--spool on|off|both]`` runs two small
scenarios with real clusters, a real gateway and real webhook processes, with the spool
on and off, and prints what the ground truth says was lost:

* ``churn-kill``: webhook-restart's ``kill-during-churn`` (same churn, seed and kill
  timing: kill 3 s into a 10 s churn at 8 writes/s, start again 2 s later) followed by a
  ``truth`` check;
* ``queued-kill``: the KCP gateway is stopped, skr-a churns (so its events queue up), its
  webhook is SIGKILLed and started again, then the gateway; then a ``truth`` check.

Each run is one scenario environment; wrap the command in the e2e lock.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import tempfile
import time
from pathlib import Path
from typing import Any

from harness.bench.loopback import (
    Files,
    encoded_review,
    kcp_and_webhook_processes,
    make_pki,
    webhook_client,
)
from harness.report.model import ScenarioReport, TimelineKind
from harness.report.stats import percentile

CONFIGS: dict[str, dict[str, str]] = {
    "off": {},
    "write": {"WATCHER_SPOOL_FSYNC": "false"},
    "fsync": {"WATCHER_SPOOL_FSYNC": "true"},
}


async def _latency_once(
    files: Files, root: Path, name: str, *, samples: int, in_flight: int
) -> dict[str, Any]:
    env = dict(CONFIGS[name])
    if name != "off":
        env["WATCHER_SPOOL_DIR"] = str(root / f"spool-{name}")
    logs = root / f"logs-{name}"
    logs.mkdir()
    async with (
        kcp_and_webhook_processes(files, logs, mode="async", delay=0.0, extra_env=env) as (
            url,
            kcp_metrics,
            _,
        ),
        webhook_client(files, url, kcp_metrics, in_flight=in_flight) as client,
    ):

        async def one(i: int) -> float:
            return await client.admit(encoded_review(i))

        for i in range(50):  # warm-up: TLS sessions, pools, code paths
            await one(-i - 1)
        serial = [await one(i) for i in range(samples)]
        base = samples
        started = time.perf_counter()
        parallel: list[float] = []
        for chunk in range(0, samples, in_flight):
            parallel += await asyncio.gather(*(one(base + chunk + j) for j in range(in_flight)))
        seconds = time.perf_counter() - started
    return {
        "spool": name,
        "samples": samples,
        "serial_p50_ms": round(percentile(serial, 50), 3),
        "serial_p99_ms": round(percentile(serial, 99), 3),
        f"in_flight_{in_flight}_p50_ms": round(percentile(parallel, 50), 3),
        f"in_flight_{in_flight}_p99_ms": round(percentile(parallel, 99), 3),
        "admissions_per_s": round(len(parallel) / seconds, 1),
    }


async def latency(samples: int, rounds: int) -> None:
    with tempfile.TemporaryDirectory(prefix="watcher-spool-bench-") as tmp:
        root = Path(tmp)
        files = make_pki(root)
        for r in range(rounds):  # interleaved, so machine noise hits every config alike
            for name in CONFIGS:
                sub = root / f"r{r}"
                sub.mkdir(exist_ok=True)
                result = await _latency_once(files, sub, name, samples=samples, in_flight=32)
                print(json.dumps({"round": r, **result}), flush=True)


CHURN = """
          clusters: [skr-a, skr-b]
          kinds: [kymas]
          mix: {create: 2, specUpdate: 4, statusUpdate: 1, labelFlip: 1, delete: 1}
          labels: {operator.kyma-project.io/watched-by: kyma}"""

SETUP = """timeout: 90s
clusters: {skrs: [{name: skr-a}, {name: skr-b}]}
watchers: [{default: true}]
steps:"""

SCENARIOS = {
    "churn-kill": f"""
name: spool-loss-churn-kill
{SETUP}
  - name: kill-during-churn
    timeout: 70s
    try:
      - churn:{CHURN}
          objects: 8
          rate: 8
          duration: 10s
          seed: 301
          background: true
      - wait: 3s
      - fault: {{action: kill, target: webhook/skr-a}}
      - wait: 2s
      - fault: {{action: start, target: webhook/skr-a}}
      - wait: 8s
      - expect:
          within: 15s
          truth: {{manager: lifecycle-manager}}
""",
    "queued-kill": f"""
name: spool-loss-queued-kill
{SETUP}
  - name: kill-with-events-queued
    timeout: 70s
    try:
      - fault: {{action: stop, target: gateway}}
      - churn:{CHURN.replace("[skr-a, skr-b]", "[skr-a]")}
          objects: 6
          rate: 8
          duration: 4s
          seed: 303
      - wait: 1s
      - fault: {{action: kill, target: webhook/skr-a}}
      - fault: {{action: start, target: webhook/skr-a}}
      - fault: {{action: start, target: gateway}}
      - expect:
          within: 20s
          truth: {{manager: lifecycle-manager}}
""",
}


def down_window_writes(report: ScenarioReport, restarted: float | None) -> int | None:
    """Writes to skr-a sent between the kill and the new process's start (its metrics'
    creation time, just before it listens): the API server let them pass unseen."""
    kills = [
        e.at
        for e in report.timeline
        if e.kind is TimelineKind.FAULT and e.source == "webhook/skr-a" and e.object == "kill"
    ]
    if not kills or restarted is None:
        return None
    return sum(
        1
        for e in report.timeline
        if e.kind is TimelineKind.MUTATION and e.source == "skr-a" and kills[-1] <= e.at < restarted
    )


async def loss(runs: int, spools: list[str], which: list[str], report_dir: Path) -> None:
    from harness.report import ReportBuilder
    from harness.runner.plan import plan_scenario
    from harness.runner.run import new_run_id
    from harness.runner.scenario import RunOptions, run_scenario
    from harness.scenario import load_scenario

    for run in range(runs):
        for key in which:
            for spool in spools:
                path = report_dir / f"{key}.yaml"
                path.write_text(SCENARIOS[key])
                scenario = load_scenario(path)
                env = {} if spool == "on" else {"WATCHER_SPOOL_DIR": ""}
                builder = ReportBuilder(new_run_id())
                options = RunOptions(log_dir=report_dir / f"logs-{key}-{spool}-{run}")
                report = await run_scenario(
                    plan_scenario(scenario, webhook_env=env),
                    builder.scenario(scenario.name, str(path)),
                    options,
                )
                truth = next((e for e in report.expectations if e.kind == "truth"), None)
                actual = truth.actual if truth is not None else report.error or "no truth check"
                counts = {
                    k: int(m.group(1)) if (m := re.search(rf"(\d+) {k}", actual)) else 0
                    for k in ("matched", "missing", "duplicate", "spurious")
                }
                replayed = report.metrics.get("webhook/skr-a:watcher_spool_replayed_total", 0.0)
                restarted = report.metrics.get("webhook/skr-a:watcher_spool_replayed_created")
                print(
                    json.dumps(
                        {
                            "scenario": key,
                            "spool": spool,
                            "run": run,
                            "status": report.status.value,
                            **counts,
                            "truth": actual.splitlines()[:12],
                            "replayed_skr_a": replayed,
                            "writes_skr_a_while_down": down_window_writes(report, restarted),
                        }
                    ),
                    flush=True,
                )


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m harness.bench.spool")
    sub = parser.add_subparsers(dest="command", required=True)
    lat = sub.add_parser("latency", help="admission latency with the spool off/on/fsync")
    lat.add_argument("--samples", type=int, default=1000)
    lat.add_argument("--rounds", type=int, default=1)
    los = sub.add_parser("loss", help="events lost on a SIGKILL, spool on and off")
    los.add_argument("--runs", type=int, default=1)
    los.add_argument("--spool", choices=("on", "off", "both"), default="both")
    los.add_argument("--scenario", choices=(*SCENARIOS, "all"), default="all")
    los.add_argument("--report-dir", type=Path, default=None)
    args = parser.parse_args()
    if args.command == "latency":
        asyncio.run(latency(args.samples, args.rounds))
        return
    spools = ["on", "off"] if args.spool == "both" else [args.spool]
    which = list(SCENARIOS) if args.scenario == "all" else [args.scenario]
    report_dir = args.report_dir or Path(tempfile.mkdtemp(prefix="watcher-spool-loss-"))
    report_dir.mkdir(parents=True, exist_ok=True)
    asyncio.run(loss(args.runs, spools, which, report_dir))


if __name__ == "__main__":
    main()
