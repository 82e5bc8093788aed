"""The KLM scale run's pure parts: its configuration, what a run recorded, and the tables,
figures and plot made from it — no I/O and no clock, so they are tested without clusters
(``tests/harness/bench/test_klm_scale_report.py``) and :mod:`harness.bench.klm_scale`
only gathers the times.

One run is one KLM build (ours as ``watcher-klm``, or any ``--klm-command``) in front of
the same kind of environment; the tables put the KLMs of one invocation side by side.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from harness.bench.common import first_at_or_after, times_by_key
from harness.bench.model import BenchResult, Cell, Table, summary
from harness.report.plot import _PALETTE, _figure, _png, _style

PLOT = "klm-scale.png"
KLM_DEFAULT_SUCCESS_S = 300.0
"""Upstream's ``--kyma-requeue-success-interval`` default (5 min)."""


@dataclass(frozen=True)
class ScaleConfig:
    """How big and how busy the run is."""

    skrs: int
    success_interval_s: float  # scaled down from KLM's 5 min to load the queue
    window_s: float  # seconds of SKR churn after every Kyma is Ready
    writes_per_s: float  # SKR Kyma spec changes per second over all SKRs
    sample_every_s: float = 1.0
    drain_s: float = 20.0  # after the window: until every event's Kyma was reconciled
    ready_within_s: float = 600.0

    @property
    def writes(self) -> int:
        return round(self.writes_per_s * self.window_s)

    @property
    def equivalent_kymas(self) -> int:
        """Kymas at KLM's default interval that put the same requeue load on the queue."""
        return round(self.skrs * KLM_DEFAULT_SUCCESS_S / self.success_interval_s)


FULL = ScaleConfig(skrs=30, success_interval_s=5.0, window_s=120.0, writes_per_s=3.0)
QUICK = ScaleConfig(skrs=6, success_interval_s=5.0, window_s=30.0, writes_per_s=1.0)


@dataclass(frozen=True)
class Sample:
    """The KCP and the KLM at ``at`` seconds after provisioning began."""

    at: float
    ready: int  # KCP Kymas in state Ready
    depth: float | None  # workqueue_depth{name="kyma"} (None: not exposed)
    reconciles: float | None  # controller_runtime_reconcile_total{controller="kyma"}


@dataclass(frozen=True)
class Write:
    """A runtime's moment (epoch seconds): a spec change of its SKR's Kyma (before the PATCH
    was sent), or as :data:`Seen` an event the KLM's listener accepted for it (on the wire)."""

    at: float
    runtime_id: str


Seen = Write


@dataclass
class KlmRun:
    """What one KLM's run recorded; times relative to ``t0`` (provisioning) unless epoch."""

    label: str
    command: str
    config: ScaleConfig
    t0: float  # epoch seconds when provisioning began
    startup: Mapping[str, float]  # seconds per start-up phase (clusters, platform, klm, ...)
    ready_after: Mapping[str, float]  # Kyma → seconds from provisioning to Ready (sampled)
    samples: Sequence[Sample]
    window: tuple[float, float]  # epoch start and end of the churn window (drain included)
    writes: Sequence[Write]
    events: Sequence[Seen]
    reconcile_starts: Mapping[str, Sequence[float]]  # Kyma key → epoch starts (log), sorted
    kyma_of: Mapping[str, str]  # runtime id → Kyma key
    requests_per_s: Mapping[str, float | None]  # phase → KCP API requests/s
    cpu_s: Mapping[str, float | None]  # component → CPU seconds in the window
    rss_mib: Mapping[str, float | None]  # component → RSS at the window's end
    failed_reconciles: int = 0  # "Reconciler error" lines in the window
    notes: list[str] = field(default_factory=list)


def event_to_reconcile(run: KlmRun) -> list[float | None]:
    """Per event in the window: seconds until its Kyma's next reconcile started (any
    trigger: the first reconcile that can see the change), None when none did."""
    start, end = run.window
    out: list[float | None] = []
    for event in run.events:
        if not start <= event.at <= end:
            continue
        starts = run.reconcile_starts.get(run.kyma_of.get(event.runtime_id, ""), ())
        found = first_at_or_after(starts, event.at)
        out.append(None if found is None else found - event.at)
    return out


def write_to_event(run: KlmRun) -> list[float | None]:
    """Per SKR write: seconds until the listener accepted an event from that runtime."""
    arrivals = times_by_key((event.runtime_id, event.at) for event in run.events)
    out: list[float | None] = []
    for write in run.writes:
        found = first_at_or_after(arrivals.get(write.runtime_id, []), write.at)
        out.append(None if found is None else found - write.at)
    return out


def reconciles_in(run: KlmRun, start: float, end: float) -> int:
    return sum(start <= t <= end for starts in run.reconcile_starts.values() for t in starts)


def _ms(values: Iterable[float | None]) -> dict[str, Any]:
    found = [v * 1000 for v in values if v is not None]
    missing = sum(v is None for v in values)
    return {**summary(found), "missing": missing}


def run_figures(run: KlmRun) -> dict[str, Any]:
    """Every figure of one run as plain JSON values."""
    start, end = run.window
    seconds = max(end - start, 1e-9)
    ready = sorted(run.ready_after.values())
    depths = [s.depth for s in run.samples if s.depth is not None and s.at >= start - run.t0]
    reconciles = reconciles_in(run, start, end)
    return {
        "label": run.label,
        "command": run.command,
        "config": asdict(run.config),
        "startup_s": dict(run.startup),
        "ready": {
            "kymas": len(run.ready_after),
            "all_ready_s": round(ready[-1], 2) if ready else None,
            "p50_s": round(ready[len(ready) // 2], 2) if ready else None,
        },
        "window_s": round(seconds, 2),
        "writes": len(run.writes),
        "events": sum(start <= e.at <= end for e in run.events),
        "reconciles": reconciles,
        "reconciles_per_s": round(reconciles / seconds, 2),
        "failed_reconciles": run.failed_reconciles,
        "write_to_event_ms": _ms(write_to_event(run)),
        "event_to_reconcile_ms": _ms(event_to_reconcile(run)),
        "depth": {
            "max": max(depths) if depths else None,
            "mean": round(sum(depths) / len(depths), 2) if depths else None,
        },
        "kcp_requests_per_s": dict(run.requests_per_s),
        "cpu_cores": {
            name: None if cpu is None else round(cpu / seconds, 3)
            for name, cpu in run.cpu_s.items()
        },
        "rss_mib": dict(run.rss_mib),
        "timeline": [asdict(s) for s in run.samples],
        "notes": list(run.notes),
    }


def _cell(value: Any, unit: str = "") -> Cell:
    if value is None:
        return "not measured"
    return f"{value:g}{unit}" if isinstance(value, int | float) else str(value)


def _latency(found: Mapping[str, Any]) -> str:
    if not found.get("count"):
        return "none"
    text = f"{found['p50']:g} / {found['p99']:g} / {found['max']:g} ms"
    return text + (f" ({found['missing']} never)" if found.get("missing") else "")


def scale_tables(figures: Sequence[Mapping[str, Any]]) -> tuple[Table, ...]:
    """One column per KLM: the way to Ready, the churn window, the cost per component."""
    columns = ("", *(f["label"] for f in figures))

    def row(name: str, pick: Any) -> tuple[Cell, ...]:
        return (name, *(pick(f) for f in figures))

    main = Table(
        "KLM under load",
        columns,
        (
            row("SKRs (real kube-apiservers)", lambda f: f["config"]["skrs"]),
            row("success requeue interval", lambda f: f"{f['config']['success_interval_s']:g} s"),
            row("clusters up", lambda f: _cell(f["startup_s"].get("clusters"), " s")),
            row("KLM ready (/readyz)", lambda f: _cell(f["startup_s"].get("klm"), " s")),
            row(
                "every Kyma Ready after provisioning",
                lambda f: _cell(f["ready"]["all_ready_s"], " s"),
            ),
            row("half the Kymas Ready", lambda f: _cell(f["ready"]["p50_s"], " s")),
            row("churn window", lambda f: f"{f['window_s']:g} s, {f['writes']} SKR writes"),
            row("events accepted by the listener", lambda f: f["events"]),
            row(
                "reconciles (log) / per s",
                lambda f: f"{f['reconciles']} / {f['reconciles_per_s']:g}",
            ),
            row("failed reconciles", lambda f: f["failed_reconciles"]),
            row(
                "SKR write → event accepted p50/p99/max", lambda f: _latency(f["write_to_event_ms"])
            ),
            row(
                "event → reconcile start p50/p99/max",
                lambda f: _latency(f["event_to_reconcile_ms"]),
            ),
            row(
                "queue depth max / mean",
                lambda f: f"{_cell(f['depth']['max'])} / {_cell(f['depth']['mean'])}",
            ),
            row(
                "KCP API requests/s: start-up / window",
                lambda f: (
                    f"{_cell(f['kcp_requests_per_s'].get('startup'))} / "
                    f"{_cell(f['kcp_requests_per_s'].get('window'))}"
                ),
            ),
        ),
    )
    components = sorted({c for f in figures for c in f["cpu_cores"]})
    cost = Table(
        "CPU (cores, mean over the window) and RSS (MiB, at its end) per component",
        columns,
        tuple(
            row(
                name,
                lambda f, n=name: (
                    f"{_cell(f['cpu_cores'].get(n))} cores, {_cell(f['rss_mib'].get(n))} MiB"
                ),
            )
            for name in components
        ),
    )
    return (main, cost)


def timeline_png(figures: Sequence[Mapping[str, Any]]) -> bytes:
    """Per KLM over time since provisioning: Kymas Ready, reconciles/s, queue depth."""
    fig = _figure(8.0, 6.6)
    axes = fig.subplots(3, 1, sharex=True)
    for n, f in enumerate(figures):
        color = _PALETTE[n % len(_PALETTE)]
        line = f["timeline"]
        at = [s["at"] for s in line]
        axes[0].plot(at, [s["ready"] for s in line], color=color, label=f["label"])
        rates, times = [], []
        for a, b in itertools.pairwise(line):
            if a["reconciles"] is not None and b["reconciles"] is not None and b["at"] > a["at"]:
                rates.append((b["reconciles"] - a["reconciles"]) / (b["at"] - a["at"]))
                times.append(b["at"])
        axes[1].plot(times, rates, color=color, linewidth=1)
        axes[2].plot(at, [s["depth"] or 0 for s in line], color=color, linewidth=1)
    for ax, label in zip(axes, ("Kymas Ready", "reconciles/s", "queue depth"), strict=True):
        _style(ax)
        ax.set_ylabel(label)
    axes[-1].set_xlabel("seconds since provisioning (the churn window follows Ready)")
    axes[0].legend(frameon=False, fontsize=8)
    if figures:
        config = figures[0]["config"]
        axes[0].set_title(
            f"KLM with {config['skrs']} SKRs, {config['success_interval_s']:g} s requeue, "
            f"{config['writes_per_s']:g} SKR writes/s",
            fontsize=10,
        )
    return _png(fig)


DESCRIPTION = (
    "Any KLM build (ours as the `watcher-klm` process; upstream's with `--klm-command`) "
    "in front of N real SKR kube-apiservers and a real KCP, each SKR with its webhook run "
    "by the harness's kubelet, certificates from the harness's cert-manager, Envoy as "
    "Istio's ingress. The success requeue interval is scaled down from KLM's 5 min so that "
    "N Kymas put the requeue load of many more on the queue; after every Kyma is Ready, "
    "SKR Kyma spec changes arrive at a fixed rate, round robin over the SKRs. Reconciles "
    "come from the KLM's log, queue depth and reconcile totals from its metrics "
    "(`workqueue_depth`, `controller_runtime_reconcile_total`), events from the wire "
    "(the sidecar between Envoy and the KLM's listener), KCP API requests from "
    "kube-apiserver's `apiserver_request_total`; the harness's own sampling (one Kyma list "
    "and one metrics scrape per second) is included in the requests/s."
)


def klm_scale_result(figures: Sequence[Mapping[str, Any]], seconds: float) -> BenchResult:
    notes = []
    if figures:
        config = ScaleConfig(**figures[0]["config"])
        notes.append(
            f"{config.skrs} Kymas at a {config.success_interval_s:g} s success interval put "
            f"the requeue load of {config.equivalent_kymas:,} Kymas at KLM's 5-minute "
            "default on the queue."
        )
    notes += [note for f in figures for note in f["notes"]]
    return BenchResult(
        name="klm-scale",
        title="10. KLM at scale (real SKRs, any KLM)",
        seconds=seconds,
        description=DESCRIPTION,
        tables=scale_tables(figures),
        figures={"runs": list(figures)},
        notes=tuple(notes),
    )
