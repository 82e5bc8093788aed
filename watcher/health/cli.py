"""``python -m watcher health --metrics URL``: the fleet's watcher health as a table.

Reads the monitor's Prometheus metrics (``watcher_health_*``) from one or more operators
and prints one row per runtime, worst first. The exit status makes it a CI gate:
``--fail-on broken`` (the default) exits 1 when any runtime is Broken, ``degraded`` also
on Degraded, ``never`` only reports; 2 when the metrics cannot be read.
"""

from __future__ import annotations

import argparse
import json
import urllib.error
import urllib.request
from typing import TextIO

from prometheus_client.parser import text_string_to_metric_families

from watcher.health.state import State
from watcher.health.table import SEVERITY, HealthRow, Sample, render, rows_from_samples, worst

FAIL_ON = {"broken": State.BROKEN, "degraded": State.DEGRADED}


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("health", help="print the fleet's watcher health from an operator's metrics")
    p.add_argument(
        "--metrics",
        action="append",
        required=True,
        metavar="URL",
        help="an operator's metrics endpoint serving watcher_health_* (repeatable)",
    )
    p.add_argument("--fail-on", choices=("broken", "degraded", "never"), default="broken")
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds per metrics request")


def fetch_samples(url: str, timeout: float) -> list[Sample]:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        text = response.read().decode("utf-8", "replace")
    return [
        (sample.name, sample.labels, sample.value)
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    ]


def _as_json(rows: list[HealthRow]) -> str:
    return json.dumps(
        [
            {
                "runtimeId": r.runtime_id,
                "state": r.state.value,
                "reason": r.reason,
                "detail": r.detail,
                "ageSeconds": r.age,
                "roundTripSeconds": r.round_trip,
                "misses": r.misses,
            }
            for r in rows
        ],
        indent=2,
    )


def run(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    samples: list[Sample] = []
    for url in args.metrics:
        try:
            samples.extend(fetch_samples(url, args.timeout))
        except (urllib.error.URLError, OSError, ValueError) as exc:
            print(f"watcher health: cannot read metrics from {url}: {exc}", file=stderr)
            return 2
    rows = rows_from_samples(samples)
    if not rows:
        print(
            "watcher health: no watcher_health_state series at "
            f"{', '.join(args.metrics)} (is a health monitor running there?)",
            file=stderr,
        )
        return 2
    if args.json:
        print(_as_json(rows), file=stdout)
    else:
        print(render(rows), file=stdout)
    threshold = FAIL_ON.get(args.fail_on)
    bad = worst(rows)
    if threshold is not None and bad is not None and SEVERITY[bad] >= SEVERITY[threshold]:
        return 1
    return 0
