"""The watcher-health failure catalogue, measured: detection and recovery per failure.

``python -m harness.bench.health_catalogue [--runs N] [--report REPORT.json ...]`` runs
the scenarios tagged ``health`` (one after another, ``watcher-harness run``) ``N`` times,
or reads reports of earlier runs, and prints the table ``docs/health.md`` records.

Each catalogue scenario has the same shape: an assert that the Kyma's ``WatcherHealth``
condition is ``False`` with the catalogue's reason right after the failure is caused
(**detection**: that assert's duration, from the failure to the condition), then the
fix and an assert that it is ``True`` again (**recovery**: from the fix to the
condition). The bounds the scenarios hold: detection within two intervals + 5 s,
recovery within one interval.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

CATALOGUE: dict[str, str] = {
    "health-webhook-stopped": "webhook process stopped",
    "health-vwc-deleted": "`skr-webhook` VWC deleted on the SKR (KLM repairs it)",
    "health-cert-expired": "SKR client certificate expired",
    "health-foreign-ca": "SKR certificate from a foreign CA",
    "health-ca-dropped": "the SKR's CA dropped from the gateway bundle",
    "health-gateway-down": "gateway down",
    "health-listener-down": "listener down",
    "health-route-deleted": "the health Watcher's route deleted",
    "health-san-mismatch": "SAN mismatch (pinning on)",
    "health-skr-apiserver-down": "SKR API server down",
    "health-kcp-delay": "KCP delay beyond the webhook's retry budget",
    "health-catch-up": "webhook stopped, a write made meanwhile (catch-up)",
}


@dataclass(frozen=True)
class Measured:
    scenario: str
    reason: str
    detection: float
    recovery: float


def measure(report: dict[str, Any]) -> list[Measured]:
    """Detection and recovery of every catalogue scenario that passed in ``report``."""
    out = []
    for scenario in report.get("scenarios", []):
        name = scenario.get("name", "")
        if name not in CATALOGUE or scenario.get("status") != "passed":
            continue
        checks = [c for c in scenario.get("expectations", []) if c.get("kind") == "assert"]
        down = next((c for c in checks if "status: 'False'" in c.get("expected", "")), None)
        if down is None:
            continue
        later = checks[checks.index(down) + 1 :]
        up = next((c for c in later if "status: 'True'" in c.get("expected", "")), None)
        if up is None:
            continue
        reason = down["expected"].split("reason: ")[-1].split("}")[0]
        out.append(Measured(name, reason, float(down["duration"]), float(up["duration"])))
    return out


def table(measured: Iterable[Measured]) -> str:
    by: dict[str, list[Measured]] = {}
    for m in measured:
        by.setdefault(m.scenario, []).append(m)

    def spread(values: Sequence[float]) -> str:
        if len(values) == 1:
            return f"{values[0]:.1f} s"
        return f"{statistics.median(values):.1f} s (max {max(values):.1f})"

    lines = [
        "| failure | reason reported | detected after | healthy again after | scenario |",
        "|---|---|---|---|---|",
    ]
    for name, label in CATALOGUE.items():
        runs = by.get(name)
        if not runs:
            lines.append(f"| {label} | - | not measured | not measured | `{name}` |")
            continue
        lines.append(
            f"| {label} | `{runs[0].reason}` | {spread([r.detection for r in runs])} | "
            f"{spread([r.recovery for r in runs])} | `{name}` |"
        )
    return "\n".join(lines)


def run_catalogue(runs: int) -> list[dict[str, Any]]:
    reports = []
    for n in range(runs):
        with tempfile.TemporaryDirectory(prefix="health-catalogue-") as out:
            command = [
                str(Path(sys.executable).parent / "watcher-harness"),
                "run",
                "--keep-going",
                "--selector",
                "tag=health",
                "--report-dir",
                out,
                str(ROOT / "scenarios"),
            ]
            print(f"run {n + 1}/{runs}: {' '.join(command[1:])}", file=sys.stderr)
            subprocess.run(command, check=False, stdout=subprocess.DEVNULL)
            reports.append(json.loads((Path(out) / "report.json").read_text()))
    return reports


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m harness.bench.health_catalogue", description=__doc__
    )
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--report", type=Path, action="append", default=[])
    args = parser.parse_args(argv)
    reports = [json.loads(p.read_text()) for p in args.report] or run_catalogue(args.runs)
    measured = [m for r in reports for m in measure(r)]
    print(table(measured))
    passed = {m.scenario for m in measured}
    missing = sorted(set(CATALOGUE) - passed)
    if missing:
        print(f"not passed in every run: {', '.join(missing)}", file=sys.stderr)
    return 0 if not missing else 1


if __name__ == "__main__":
    raise SystemExit(main())
