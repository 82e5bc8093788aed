"""What one soak run found, and the JSON document (``docs/soak.json``) the Markdown report
and the plot are rendered from.
"""

from __future__ import annotations

import dataclasses
import os
import platform
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from harness.report.stats import percentile
from harness.soak.config import SoakConfig
from harness.soak.model import Criterion, Growth, OracleCounts, Sample, passed


@dataclass(frozen=True)
class ProcessInfo:
    name: str
    role: str
    pid: int | None
    command: str


@dataclass(frozen=True)
class SoakResult:
    """Everything the report needs; ``criteria`` decide the exit code."""

    config: SoakConfig
    started_at: float
    elapsed: float
    achieved_rate: float
    samples: tuple[Sample, ...]
    processes: tuple[ProcessInfo, ...]
    growths: tuple[Growth, ...]
    oracle: OracleCounts
    latency_ms: dict[str, float]
    criteria: tuple[Criterion, ...]
    findings: tuple[str, ...]
    machine: dict[str, Any]
    listener_hop: str = "plain HTTP"
    """How the gateway reaches the listeners: ``mTLS`` (mesh CA) or ``plain HTTP``."""


def latency_summary(values_s: Sequence[float]) -> dict[str, float]:
    if not values_s:
        return {}
    ms = [v * 1000 for v in values_s]
    return {
        "count": len(ms),
        "p50": round(percentile(ms, 50), 2),
        "p99": round(percentile(ms, 99), 2),
        "max": round(max(ms), 2),
    }


def machine() -> dict[str, Any]:
    return {
        "cores": os.cpu_count(),
        "load_1min": round(os.getloadavg()[0], 2),
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
    }


def to_json(result: SoakResult, *, command: str) -> dict[str, Any]:
    """The JSON document ``docs/soak.json`` holds (and the report is rendered from)."""
    config, w = result.config, result.config.windows
    pids = {p.name: p for p in result.processes}
    series: dict[str, list[list[float | int | None]]] = {}
    for s in result.samples:
        row = [round(s.t, 2), s.pid, s.rss, s.fds, s.connections]
        series.setdefault(s.process, []).append(row)
    return {
        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(result.started_at)),
        "command": command,
        "machine": result.machine,
        "gateway_to_listener": result.listener_hop,
        "config": {
            "duration_s": config.duration,
            "rate": config.rate,
            "skrs": config.skrs,
            "objects_per_kind_and_skr": config.objects,
            "seed": config.seed,
            "sample_interval_s": config.interval,
            "min_warmup_s": config.min_warmup,
            "thresholds": dataclasses.asdict(config.thresholds),
        },
        "windows_s": dataclasses.asdict(w),
        "elapsed_s": round(result.elapsed, 1),
        "achieved_rate": round(result.achieved_rate, 2),
        "passed": passed(result.criteria),
        "criteria": [dataclasses.asdict(c) for c in result.criteria],
        "oracle": {**dataclasses.asdict(result.oracle), "writes_ok": result.oracle.writes_ok},
        "latency_ms": result.latency_ms,
        "processes": [
            {
                "name": g.process,
                "role": g.role,
                "pid": pids[g.process].pid if g.process in pids else None,
                "command": pids[g.process].command if g.process in pids else "",
                **{k: v for k, v in dataclasses.asdict(g).items() if k not in ("process", "role")},
                "rss_growth": g.rss_growth,
                "fd_growth": g.fd_growth,
            }
            for g in result.growths
        ],
        "findings": list(result.findings),
        "samples": {
            "columns": ["t_s", "pid", "rss_bytes", "fds", "established_connections"],
            "by_process": series,
        },
    }
