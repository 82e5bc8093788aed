"""Requeue economics: reconciles per Kyma-hour each mode needs for the SAME reaction p99 (pure).

Comparing a 5 min safety requeue with 30 s polling cannot say how much the watcher saves
(the two reaction times differ by orders of magnitude), so this module fixes the reaction
p99 and searches the polling interval instead: a seeded, skewed and bursty write trace is
replayed against KLM's own :class:`~harness.kcp.lifecycle_manager.queue.workqueue.WorkQueue`
by a discrete-event loop in simulated time. The model (workers, spans, write trace, floor,
verdict) is described in section 5 of ``docs/benchmarks.md`` (:func:`run_requeue` writes it).
"""

from __future__ import annotations

import asyncio
import bisect
import heapq
import math
import random
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from harness.bench.common import BenchContext
from harness.bench.model import BenchResult, Cell, Table, Target
from harness.kcp.lifecycle_manager.queue.workqueue import Trigger, WorkQueue
from harness.report.stats import percentile

DEFAULT_DELIVERY_DELAY = 0.05
"""Seconds from an SKR write to the KCP event when no end-to-end figure was measured
in the same run (order of the measured e2e p50 to the listener on this machine)."""

RECONCILE_SECONDS = 0.1
"""One Kyma reconcile, a stated constant (KLM's real duration varies with the SKR)."""

CHANGES_PER_HOUR = 3.0
SKEW_SIGMA = 1.5
BURST_CYCLE_S = 3600.0
BURST_S = 900.0
BURST_FACTOR = 2.2
QUIET_FACTOR = (BURST_CYCLE_S - BURST_S * BURST_FACTOR) / (BURST_CYCLE_S - BURST_S)
"""0.6: the rest of the cycle, so the cycle's mean intensity is exactly 1."""

FLOOR_S = 1.0
"""The lowest reaction p99 a polling interval is searched for: polling cannot get below
~0.99 x ``reconcile_seconds`` at any interval, and below 1 s it already costs > 3,500
reconciles per Kyma-hour."""

WARMUP_CYCLES = 1.0
"""Simulated time before the span, in passes over the fleet (plus one interval): enough for
a saturated queue to reach its round robin."""

SATURATED = 0.95
"""Utilisation from which the workers count as saturated: reactions then grow with the queue."""

WANTED_RATIO = 100.0
"""The issue's target: the watcher needs ≥ 100x fewer reconciles at the same reaction p99."""

LADDER: tuple[float, ...] = (0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0, 600.0, 1800.0)
"""Polling intervals of the curve, also the brackets of the search (600 s and 30 min show
where 1 worker stops saturating at 5,000 Kymas)."""


@dataclass(frozen=True)
class Mode:
    """How KLM learns about changes: ``interval`` = requeue after a successful reconcile."""

    name: str
    interval: float
    events: bool


def polling(interval: float) -> Mode:
    return Mode(f"polling {interval_label(interval)}", interval, events=False)


def watcher(safety_requeue: float) -> Mode:
    return Mode(f"watcher + {interval_label(safety_requeue)} requeue", safety_requeue, events=True)


def interval_label(seconds: float) -> str:
    """``0.5 s``, ``30 s``, ``5 min``; a searched interval keeps three significant digits."""
    if seconds >= 60 and seconds % 60 == 0:
        return f"{seconds / 60:g} min"
    return f"{seconds:,.0f} s" if seconds >= 100 else f"{seconds:.3g} s"


def intensity(t: float) -> float:
    """The fleet-wide change intensity at ``t`` (mean 1 over a cycle): the busy-hour burst."""
    return BURST_FACTOR if t % BURST_CYCLE_S < BURST_S else QUIET_FACTOR


@dataclass(frozen=True)
class Trace:
    """Changes ``(time s, kyma index)`` sorted by time, in [0, ``span``) of simulated time.

    ``rates`` is each Kyma's mean changes per hour (its skew weight x the fleet mean).
    """

    kymas: int
    span: float
    changes_per_hour: float
    seed: int
    changes: tuple[tuple[float, int], ...]
    rates: tuple[float, ...] = field(repr=False)


def write_trace(
    kymas: int, span: float, changes_per_hour: float = CHANGES_PER_HOUR, *, seed: int
) -> Trace:
    """The seeded write trace: log-normal per-Kyma rates (skew), busy-hour bursts.

    Each Kyma is an inhomogeneous Poisson process with rate ``rates[k] * intensity(t)``,
    drawn by thinning a homogeneous one at the burst peak.
    """
    rng = random.Random(seed)
    raw = [rng.lognormvariate(0.0, SKEW_SIGMA) for _ in range(kymas)]
    mean = sum(raw) / kymas
    rates = tuple(changes_per_hour * w / mean for w in raw)
    changes: list[tuple[float, int]] = []
    for kyma, rate in enumerate(rates):
        peak = rate / 3600 * BURST_FACTOR
        t = rng.expovariate(peak)
        while t < span:
            if rng.random() * BURST_FACTOR < intensity(t):
                changes.append((t, kyma))
            t += rng.expovariate(peak)
    changes.sort()
    return Trace(kymas, span, changes_per_hour, seed, tuple(changes), rates)


def trace_summary(trace: Trace) -> dict[str, Any]:
    """What the trace looks like: how skewed, how many changes, the burst profile."""
    rates = sorted(trace.rates)
    per_kyma = [0] * trace.kymas
    for _, kyma in trace.changes:
        per_kyma[kyma] += 1
    top = sorted(per_kyma, reverse=True)[: max(1, trace.kymas // 10)]
    return {
        "kymas": trace.kymas,
        "span_s": trace.span,
        "changes": len(trace.changes),
        "changes_per_kyma_hour": round(len(trace.changes) / trace.kymas / trace.span * 3600, 3),
        "seed": trace.seed,
        "rate_per_kyma_hour": {
            "p25": round(percentile(rates, 25), 3),
            "p50": round(percentile(rates, 50), 3),
            "p90": round(percentile(rates, 90), 3),
            "max": round(rates[-1], 3),
        },
        "top_10pct_kymas_share_of_changes": round(sum(top) / max(1, len(trace.changes)), 3),
        "skew_sigma": SKEW_SIGMA,
        "burst": {
            "cycle_s": BURST_CYCLE_S,
            "burst_s": BURST_S,
            "burst_factor": BURST_FACTOR,
            "quiet_factor": round(QUIET_FACTOR, 3),
        },
    }


@dataclass(frozen=True)
class SimSettings:
    """The KLM model: ``workers`` concurrent reconciles (None = one per Kyma, no limit)."""

    workers: int | None = 1
    reconcile_seconds: float = RECONCILE_SECONDS
    delivery_delays: tuple[float, ...] = (DEFAULT_DELIVERY_DELAY,)
    """Event delays drawn (seeded) per change: a constant, or measured end-to-end samples."""
    seed: int = 0


def workers_label(workers: int | None) -> str:
    if workers is None:
        return "unlimited (one per Kyma)"
    return f"{workers} (KLM default)" if workers == 1 else str(workers)


def workers_phrase(workers: int | None) -> str:
    """``1 worker (KLM default)``, ``4 workers``, ``unlimited workers (one per Kyma)``."""
    if workers is None:
        return "unlimited workers (one per Kyma)"
    return "1 worker (KLM default)" if workers == 1 else f"{workers} workers"


def saturated(utilization: float) -> bool:
    """Workers busy (almost) all the time: the queue, not the interval, sets the reaction."""
    return utilization >= SATURATED


@dataclass(frozen=True)
class ModeResult:
    """One configuration on one trace; reconciles and reactions count the span [0, span_s)."""

    mode: str
    kymas: int
    workers: int
    interval_s: float
    events: bool
    span_s: float
    reconciles: int
    reconciles_per_kyma_hour: float
    event_triggered: int
    busy_workers: float
    """Mean concurrent reconciles (reconcile-seconds per second)."""
    utilization: float
    saturated: bool
    reaction_p50_s: float
    reaction_p99_s: float
    reaction_max_s: float
    changes: int
    unseen_changes: int
    simulated_reconciles: int
    """Every reconcile the loop ran, warm-up and tail included: the benchmark's cost."""


def _advance(
    queue: WorkQueue[int],
    running: list[tuple[float, int, int]],
    arrivals: deque[tuple[float, int]],
    now: float,
    interval: float,
) -> int:
    """Up to ``now``: finished reconciles requeue their Kyma after ``interval``, arrived
    events enqueue theirs. Returns how many workers became idle."""
    freed = 0
    while running and running[0][0] <= now:
        _, _, kyma = heapq.heappop(running)
        queue.add_after(kyma, Trigger.REQUEUE_TIMER, now + interval)
        queue.done(kyma)
        freed += 1
    while arrivals and arrivals[0][0] <= now:
        _, kyma = arrivals.popleft()
        queue.add(kyma, Trigger.WATCH_EVENT, now)
    return freed


def simulate(
    trace: Trace, mode: Mode, settings: SimSettings = SimSettings(), *, span: float | None = None
) -> ModeResult:
    """Replay the first ``span`` seconds of ``trace`` against the work queue; deterministic."""
    span = trace.span if span is None else min(span, trace.span)
    d = settings.reconcile_seconds
    workers = settings.workers or trace.kymas
    cycle = trace.kymas * d / workers  # one pass over the fleet when every Kyma is queued
    warmup = mode.interval + d + WARMUP_CYCLES * cycle
    max_delay = max(settings.delivery_delays) if mode.events else 0.0
    stop = span + 4 * max(mode.interval + d, cycle) + max_delay
    rng = random.Random(settings.seed)
    queue: WorkQueue[int] = WorkQueue()
    for kyma in range(trace.kymas):
        queue.add_after(kyma, Trigger.REQUEUE_TIMER, -warmup + rng.random() * mode.interval)
    window = trace.changes[: bisect.bisect_left(trace.changes, (span, -1))]
    pending: list[deque[float]] = [deque() for _ in range(trace.kymas)]
    for t, kyma in window:
        pending[kyma].append(t)
    arrivals: deque[tuple[float, int]] = deque(
        sorted((t + rng.choice(settings.delivery_delays), k) for t, k in window)
        if mode.events
        else ()
    )
    running: list[tuple[float, int, int]] = []  # (finish time, seq, kyma)
    reactions: list[float] = []
    unreacted = len(window)
    reconciles = event_triggered = seq = 0  # seq counts every reconcile
    idle, now = workers, -warmup
    while True:
        queue.promote(now)
        while idle and (item := queue.get()) is not None:
            kyma = item.key
            if 0 <= now < span:
                reconciles += 1
                event_triggered += Trigger.WATCH_EVENT in item.triggers
            waiting = pending[kyma]
            while waiting and waiting[0] <= now:
                reactions.append(now - waiting.popleft())
                unreacted -= 1
            seq += 1
            heapq.heappush(running, (now + d, seq, kyma))
            idle -= 1
        if now >= span and not unreacted:
            break
        wakeup = queue.next_wakeup() if idle else None
        following = min(
            running[0][0] if running else math.inf,
            arrivals[0][0] if arrivals else math.inf,
            math.inf if wakeup is None else wakeup,
        )
        if following > stop:
            break
        now = max(now, following)
        idle += _advance(queue, running, arrivals, now, mode.interval)
    busy = reconciles * d / span
    reactions += [math.inf] * unreacted
    return ModeResult(
        mode=mode.name,
        kymas=trace.kymas,
        workers=workers,
        interval_s=mode.interval,
        events=mode.events,
        span_s=round(span, 1),
        reconciles=reconciles,
        reconciles_per_kyma_hour=round(reconciles / trace.kymas / span * 3600, 2),
        event_triggered=event_triggered,
        busy_workers=round(busy, 3),
        utilization=round(busy / workers, 3),
        saturated=saturated(busy / workers),
        reaction_p50_s=_pct(reactions, 50),
        reaction_p99_s=_pct(reactions, 99),
        reaction_max_s=round(max(reactions), 3) if reactions else math.nan,
        changes=len(window),
        unseen_changes=unreacted,
        simulated_reconciles=seq,
    )


def _pct(values: Sequence[float], q: float) -> float:
    return round(percentile(values, q), 3) if values else math.nan


def _finite(value: float) -> float | None:
    """JSON has no infinity: an unseen change's reaction is written as null."""
    return None if math.isinf(value) else value


def point_json(result: ModeResult) -> dict[str, Any]:
    """One point of the curve as plain JSON values."""
    return {k: _finite(v) if isinstance(v, float) else v for k, v in asdict(result).items()}


@dataclass(frozen=True)
class Plan:
    """What one run simulates, and how much simulated time it may spend per configuration."""

    fleets: tuple[int, ...] = (100, 5000)
    workers: tuple[int | None, ...] = (1, None)
    ladder: tuple[float, ...] = LADDER
    safety_requeues: tuple[float, ...] = (300.0, 600.0, 1800.0)
    """The first is KLM's default (5 min) and carries the targets; the others are sensitivity."""
    changes_per_hour: float = CHANGES_PER_HOUR
    target_changes: int = 2000
    reconcile_budget: int = 100_000
    min_cycles: float = 3.0
    tolerance: float = 0.05
    """The search stops when the bracket is narrower than this (relative)."""
    floor_s: float = FLOOR_S
    reconcile_seconds: float = RECONCILE_SECONDS
    seed: int = 20260505


FULL_PLAN = Plan()
QUICK_PLAN = Plan(target_changes=500, reconcile_budget=20_000, tolerance=0.1)


def span_for(plan: Plan, *, kymas: int, interval: float, workers: int, events: bool) -> float:
    """Simulated seconds for one configuration: enough for ``plan.target_changes`` changes,
    cut to ``plan.reconcile_budget`` reconciles, never below a few intervals; a watcher
    configuration gets whole burst cycles, so it sees the stated mean write rate.

    Nondecreasing in ``interval``, so the span at the longest planned interval bounds every
    searched one and the trace can be drawn once per fleet size.
    """
    d = plan.reconcile_seconds
    fleet_rate = kymas * plan.changes_per_hour / 3600
    want = plan.target_changes / fleet_rate
    demand = kymas / (interval + d) + (fleet_rate * BURST_FACTOR if events else 0.0)
    per_second = min(demand, workers / d)
    span = max(min(want, plan.reconcile_budget / per_second), plan.min_cycles * (interval + d))
    if events or span >= BURST_CYCLE_S:
        # whole burst cycles: the watcher's event-triggered reconciles then see the stated
        # mean write rate (polling's reconciles do not depend on it)
        span = BURST_CYCLE_S * max(1, math.ceil(span / BURST_CYCLE_S - 1e-9))
    return span


def comparison_target(watcher_p99: float, floor: float) -> tuple[float, str]:
    """The reaction p99 polling must reach: the watcher's, or the floor when that is lower."""
    if watcher_p99 >= floor:
        return watcher_p99, "the watcher's p99"
    return floor, "the floor (the watcher's p99 is lower)"


@dataclass(frozen=True)
class Search:
    """The longest interval whose p99 ≤ ``target``; ``evaluations`` = (interval, p99) tried."""

    target: float
    found: float | None
    evaluations: tuple[tuple[float, float], ...]


def longest_interval_within(
    p99_of: Callable[[float], float],
    target: float,
    ladder: Sequence[float],
    *,
    tolerance: float = 0.05,
    max_steps: int = 12,
) -> Search:
    """Longest interval with ``p99_of(interval) ≤ target``: the ladder brackets it, a
    geometric bisection narrows the bracket to ``tolerance``.

    The result was itself evaluated, so its p99 ≤ ``target`` holds whatever the noise; for a
    nondecreasing ``p99_of`` it is also within ``tolerance`` of the longest such interval.
    None when even the shortest ladder interval misses the target.
    """
    evaluations: list[tuple[float, float]] = []

    def ok(interval: float) -> bool:
        value = p99_of(interval)
        evaluations.append((interval, value))
        return value <= target

    rungs = sorted(ladder)
    passing = [i for i, interval in enumerate(rungs) if ok(interval)]
    if not passing:
        return Search(target, None, tuple(evaluations))
    low = rungs[passing[-1]]
    if passing[-1] == len(rungs) - 1:
        return Search(target, low, tuple(evaluations))
    high = rungs[passing[-1] + 1]
    for _ in range(max_steps):
        if high / low <= 1 + tolerance:
            break
        middle = math.sqrt(low * high)
        if ok(middle):
            low = middle
        else:
            high = middle
    return Search(target, low, tuple(evaluations))


@dataclass(frozen=True)
class Comparison:
    """The watcher at one safety requeue vs the polling interval matching its reaction p99.

    ``polling`` is the found interval's result, or polling's best p99 when none matched.
    """

    watcher: ModeResult
    target_p99_s: float
    basis: str
    found_interval_s: float | None
    polling: ModeResult
    search: Search

    @property
    def reachable(self) -> bool:
        return self.found_interval_s is not None

    @property
    def ratio(self) -> float:
        """Polling's reconciles per Kyma-hour over the watcher's."""
        return self.polling.reconciles_per_kyma_hour / self.watcher.reconciles_per_kyma_hour

    def to_json(self) -> dict[str, Any]:
        return {
            "safety_requeue_s": self.watcher.interval_s,
            "target_p99_s": self.target_p99_s,
            "basis": self.basis,
            "reachable": self.reachable,
            "found_interval_s": (
                None if self.found_interval_s is None else round(self.found_interval_s, 3)
            ),
            "ratio": round(self.ratio, 2),
            "watcher": point_json(self.watcher),
            "polling": point_json(self.polling),
            "evaluations": [[round(i, 3), _finite(p)] for i, p in self.search.evaluations],
        }


def best_polling(points: Sequence[ModeResult]) -> ModeResult:
    """Polling's lowest p99 (the longest interval among equals, as it costs least)."""
    return min(points, key=lambda r: (r.reaction_p99_s, -r.interval_s))


def target_met(comparison: Comparison, wanted: float = WANTED_RATIO) -> bool:
    """≥ ``wanted`` x fewer reconciles at the same p99, or polling cannot reach that p99 at
    all because its workers saturate (it would need unboundedly many). Never when the
    watcher's own workers saturate: its reconcile rate is then KLM's capacity, not a saving.
    """
    if comparison.watcher.saturated:
        return False
    if comparison.reachable:
        return comparison.ratio >= wanted
    return comparison.polling.saturated


@dataclass(frozen=True)
class WorkerRun:
    """Every configuration at one fleet size and one worker setting."""

    kymas: int
    workers: int | None
    ladder: tuple[ModeResult, ...]
    watchers: tuple[ModeResult, ...]
    comparisons: tuple[Comparison, ...]
    searched: tuple[ModeResult, ...]
    """Polling intervals the search tried beyond the ladder."""

    @property
    def simulated_reconciles(self) -> int:
        return sum(r.simulated_reconciles for r in (*self.ladder, *self.watchers, *self.searched))

    def to_json(self) -> dict[str, Any]:
        return {
            "kymas": self.kymas,
            "workers": self.workers if self.workers is not None else self.kymas,
            "workers_label": workers_label(self.workers),
            "polling_curve": [point_json(r) for r in self.ladder],
            "watcher_points": [point_json(r) for r in self.watchers],
            "searched": [point_json(r) for r in self.searched],
            "comparisons": [c.to_json() for c in self.comparisons],
            "simulated_reconciles": self.simulated_reconciles,
        }


def run_workers(
    trace: Trace, workers: int | None, plan: Plan, delays: Sequence[float]
) -> WorkerRun:
    """The polling ladder, the watcher points and one search per safety requeue."""
    settings = SimSettings(
        workers=workers,
        reconcile_seconds=plan.reconcile_seconds,
        delivery_delays=tuple(delays),
        seed=plan.seed,
    )
    count = workers or trace.kymas
    cache: dict[float, ModeResult] = {}

    def poll(interval: float) -> ModeResult:
        if interval not in cache:
            span = span_for(plan, kymas=trace.kymas, interval=interval, workers=count, events=False)
            cache[interval] = simulate(trace, polling(interval), settings, span=span)
        return cache[interval]

    ladder = tuple(poll(interval) for interval in plan.ladder)
    watchers = tuple(
        simulate(
            trace,
            watcher(requeue),
            settings,
            span=span_for(plan, kymas=trace.kymas, interval=requeue, workers=count, events=True),
        )
        for requeue in plan.safety_requeues
    )
    comparisons = []
    for point in watchers:
        target, basis = comparison_target(point.reaction_p99_s, plan.floor_s)
        search = longest_interval_within(
            lambda i: poll(i).reaction_p99_s, target, plan.ladder, tolerance=plan.tolerance
        )
        matched = poll(search.found) if search.found is not None else best_polling(ladder)
        comparisons.append(Comparison(point, target, basis, search.found, matched, search))
    searched = tuple(r for i, r in sorted(cache.items()) if i not in plan.ladder)
    return WorkerRun(trace.kymas, workers, ladder, watchers, tuple(comparisons), searched)


def _seconds(value: float) -> str:
    if math.isinf(value):
        return "∞ (unseen changes)"
    if value < 1:
        return f"{value * 1000:.0f} ms"
    return f"{value:.1f} s" if value < 100 else f"{value:,.0f} s"


def _span(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.3g} s"
    return f"{seconds / 60:.0f} min" if seconds < 7200 else f"{seconds / 3600:g} h"


def _rate(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def _ratio(value: float) -> str:
    return f"{value:,.0f}x" if value >= 10 else f"{value:.1f}x"


def _busy(result: ModeResult) -> str:
    text = f"{result.busy_workers:,.2f} of {result.workers:,}"
    return text + " (saturated)" if result.saturated else text


def _comparison_cells(c: Comparison) -> dict[str, Cell]:
    """Polling interval, its p99, its reconciles per Kyma-hour, and the verdict."""
    poll = c.polling
    if c.reachable:
        assert c.found_interval_s is not None
        interval = interval_label(c.found_interval_s)
        p99 = _seconds(poll.reaction_p99_s)
    else:
        why = "workers saturated" if poll.saturated else f"none ≥ {LADDER[0]:g} s"
        interval = f"none ({why})"
        p99 = f"best {_seconds(poll.reaction_p99_s)} (at {interval_label(poll.interval_s)})"
    if c.watcher.saturated:
        verdict = f"no saving: KLM is over capacity in both modes ({_ratio(c.ratio)})"
    elif c.reachable:
        verdict = f"{_ratio(c.ratio)} fewer"
    else:
        verdict = f"polling cannot reach it ({_ratio(c.ratio)} more even at its best p99)"
    return {
        "polling interval found": interval,
        "polling p99": p99,
        "polling per Kyma-hour": _rate(poll.reconciles_per_kyma_hour),
        "watcher needs": verdict,
    }


def comparison_table(runs: Sequence[WorkerRun], plan: Plan) -> Table:
    main = plan.safety_requeues[0]
    return Table.of(
        "Reconciles per Kyma-hour at the same reaction p99",
        [
            {
                "Kymas": f"{run.kymas:,}",
                "workers": workers_label(run.workers),
                "watcher safety requeue": interval_label(c.watcher.interval_s)
                + ("" if c.watcher.interval_s == main else " (sensitivity)"),
                "watcher p99": _seconds(c.watcher.reaction_p99_s)
                + (" (saturated)" if c.watcher.saturated else ""),
                "watcher per Kyma-hour": _rate(c.watcher.reconciles_per_kyma_hour),
                "p99 polling must reach": f"{_seconds(c.target_p99_s)}: {c.basis}",
                **_comparison_cells(c),
            }
            for run in runs
            for c in run.comparisons
        ],
        note=(
            "Polling interval found = the longest interval whose reaction p99 is at most the "
            "target (ladder bracket, then geometric bisection to "
            f"{plan.tolerance:.0%}). The target is the watcher's p99, or a "
            f"{plan.floor_s:g} s floor when the watcher is faster: polling cannot get below "
            f"~{0.99 * plan.reconcile_seconds * 1000:.0f} ms at any interval (a change landing "
            "during a reconcile waits for the next one), so matching the floor understates "
            "the watcher's advantage. Unlimited workers (one per Kyma) is polling's best "
            "case, not a KLM setting; busy workers in the tables below say how many "
            "reconciles it keeps running at once."
        ),
    )


def configurations_table(kymas: int, runs: Sequence[WorkerRun]) -> Table:
    return Table.of(
        f"{kymas:,} Kymas: every configuration (the curve)",
        [
            {
                "workers": workers_label(run.workers),
                "mode": r.mode,
                "per Kyma-hour": _rate(r.reconciles_per_kyma_hour),
                "event-triggered": r.event_triggered,
                "busy workers": _busy(r),
                "reaction p50": _seconds(r.reaction_p50_s),
                "reaction p99": _seconds(r.reaction_p99_s),
                "reaction max": _seconds(r.reaction_max_s),
                "changes": r.changes,
                "simulated span": _span(r.span_s),
            }
            for run in runs
            for r in (*run.ladder, *run.watchers)
        ],
        note=(
            "Busy workers = mean concurrent reconciles; saturated = busy ≥ "
            f"{SATURATED:.0%} of the workers: every queued Kyma waits for a pass over the "
            "queue, so the reaction grows with the queue, whatever the interval."
        ),
    )


def _fleet_phrase(c: Comparison) -> str:
    kymas = f"{c.watcher.kymas:,} Kymas"
    watcher_part = (
        f"watcher {_rate(c.watcher.reconciles_per_kyma_hour)}/h at p99 "
        f"{_seconds(c.watcher.reaction_p99_s)}"
    )
    if c.watcher.saturated:
        return (
            f"{kymas}: {_ratio(c.ratio)}, KLM over capacity in both modes ({watcher_part}, "
            f"saturated; polling's best p99 {_seconds(c.polling.reaction_p99_s)} at "
            f"{_rate(c.polling.reconciles_per_kyma_hour)}/h)"
        )
    if c.reachable:
        assert c.found_interval_s is not None
        return (
            f"{kymas}: {_ratio(c.ratio)} ({watcher_part}; polling every "
            f"{interval_label(c.found_interval_s)} {_rate(c.polling.reconciles_per_kyma_hour)}"
            f"/h at p99 {_seconds(c.polling.reaction_p99_s)})"
        )
    return (
        f"{kymas}: polling cannot reach {_seconds(c.target_p99_s)} at any interval (best "
        f"{_seconds(c.polling.reaction_p99_s)} at {_rate(c.polling.reconciles_per_kyma_hour)}"
        f"/h, workers saturated; {watcher_part})"
    )


def _capacity_note(c: Comparison, others: Sequence[Comparison], plan: Plan) -> str:
    """Why the watcher saves nothing when KLM's workers cannot keep up, and what lifts it."""
    d = plan.reconcile_seconds
    kymas, workers = c.watcher.kymas, c.watcher.workers
    capacity = workers / d
    timers = kymas / c.watcher.interval_s
    burst = timers + kymas * plan.changes_per_hour / 3600 * BURST_FACTOR
    alternatives = "; ".join(
        f"a {interval_label(o.watcher.interval_s)} safety requeue gives p99 "
        f"{_seconds(o.watcher.reaction_p99_s)} at {_rate(o.watcher.reconciles_per_kyma_hour)}/h"
        + (
            " (still saturated)"
            if o.watcher.saturated
            else f" ({_ratio(o.ratio)} fewer than polling at that p99)"
            if o.reachable
            else ", which polling cannot reach at any interval"
        )
        for o in others
    )
    return (
        f"At {kymas:,} Kymas, {workers} worker{'s' if workers > 1 else ''} x "
        f"{d * 1000:.0f} ms do{'' if workers > 1 else 'es'} at most "
        f"{capacity:,.0f} reconciles/s = {capacity * 3600 / kymas:.3g} per Kyma-hour, below the "
        f"{3600 * timers / kymas:.3g} per Kyma-hour the {interval_label(c.watcher.interval_s)} "
        f"safety requeue alone needs ({timers:.1f}/s; {burst:.1f}/s with the events of a "
        "burst). KLM is then over capacity in both modes: every Kyma waits for a pass over "
        f"the queue (watcher p99 {_seconds(c.watcher.reaction_p99_s)}, polling's best "
        f"{_seconds(c.polling.reaction_p99_s)}, both {_rate(c.polling.reconciles_per_kyma_hour)}"
        "/h), so no reconciles can be saved. KLM's capacity, not the watcher's: by "
        f"arithmetic (not simulated) ≥ {math.ceil(burst * d / SATURATED):,} workers or "
        f"reconciles ≤ {1000 * workers * SATURATED / burst:.0f} ms keep up even in a burst, "
        "and then the unlimited-workers row applies; a longer safety requeue helps too: "
        f"{alternatives}."
    )


def _target(workers: int | None, runs: Sequence[WorkerRun], plan: Plan) -> Target:
    mine = [r for r in runs if r.workers == workers]
    main = [r.comparisons[0] for r in mine]
    notes = [
        _capacity_note(run.comparisons[0], run.comparisons[1:], plan)
        for run in mine
        if run.comparisons[0].watcher.saturated
    ]
    notes += [
        f"At {c.watcher.kymas:,} Kymas polling needs only {_ratio(c.ratio)} the watcher's "
        f"reconciles for p99 {_seconds(c.target_p99_s)}."
        for c in main
        if not c.watcher.saturated and not target_met(c)
    ]
    return Target(
        "watcher vs polling, reconciles per Kyma-hour at the same reaction p99: "
        f"{workers_phrase(workers)}, {interval_label(plan.safety_requeues[0])} safety requeue",
        f"≥ {WANTED_RATIO:g}x fewer",
        "; ".join(_fleet_phrase(c) for c in main),
        all(target_met(c) for c in main),
        note=" ".join(notes),
    )


async def run_in_suite(ctx: BenchContext) -> BenchResult:
    """:func:`run_requeue` with the end-to-end delays benchmark 2 measured in this run."""
    delays = ctx.shared.get("e2e_delays_s", ())
    source = ctx.shared.get("e2e_delays_source", "")
    return await asyncio.to_thread(
        run_requeue, quick=ctx.quick, delivery_delays=delays, delay_source=source
    )


def run_requeue(
    *,
    quick: bool,
    delivery_delays: Sequence[float] = (),
    delay_source: str = "",
    plan: Plan | None = None,
) -> BenchResult:
    """Benchmark 5: reconciles per Kyma-hour at the same reaction p99, per fleet size.

    ``delivery_delays`` (seconds) are measured write → reconcile-start samples (benchmark
    2); without them every event takes :data:`DEFAULT_DELIVERY_DELAY`.
    """
    started = time.monotonic()
    plan = plan or (QUICK_PLAN if quick else FULL_PLAN)
    delays = tuple(delivery_delays) or (DEFAULT_DELIVERY_DELAY,)
    source = (
        delay_source
        if delivery_delays
        else f"documented constant {DEFAULT_DELIVERY_DELAY * 1000:.0f} ms"
    )
    runs: list[WorkerRun] = []
    traces: list[Trace] = []
    for kymas in plan.fleets:
        span = max(
            span_for(plan, kymas=kymas, interval=interval, workers=workers or kymas, events=events)
            for interval, events in (
                *((i, False) for i in plan.ladder),
                *((r, True) for r in plan.safety_requeues),
            )
            for workers in plan.workers
        )
        trace = write_trace(kymas, span, plan.changes_per_hour, seed=plan.seed)
        traces.append(trace)
        runs += [run_workers(trace, workers, plan, delays) for workers in plan.workers]
    seconds = time.monotonic() - started
    simulated = sum(run.simulated_reconciles for run in runs)
    delay = percentile(delays, 50)
    summaries = [trace_summary(t) for t in traces]
    trace_note = "; ".join(
        f"{s['kymas']:,} Kymas: {s['changes']:,} changes in {s['span_s'] / 3600:g} h, "
        f"per-Kyma rate p50 {s['rate_per_kyma_hour']['p50']:g}/h, p90 "
        f"{s['rate_per_kyma_hour']['p90']:g}/h, max {s['rate_per_kyma_hour']['max']:g}/h, "
        f"busiest 10% of Kymas make {s['top_10pct_kymas_share_of_changes']:.0%} of the changes"
        for s in summaries
    )
    description = (
        "Reconciles per Kyma-hour each mode needs to reach the same reaction p99 (change → "
        "start of the next reconcile of that Kyma), by a discrete-event simulation over the "
        "KLM work queue (`harness.kcp.lifecycle_manager.queue.workqueue.WorkQueue`) in "
        "simulated time; no real sleeping. "
        f"KLM model: {plan.reconcile_seconds * 1000:.0f} ms per reconcile, requeue after "
        "each reconcile, 1 worker (`max-concurrent-kyma-reconciles` default) and, labelled, "
        "one worker per Kyma (polling's best case). Watcher events arrive after a delay "
        f"drawn from {len(delays)} sample(s), median {delay * 1000:.0f} ms ({source}). "
        f"Write trace (seed {plan.seed}): mean {plan.changes_per_hour:g} changes per "
        f"Kyma-hour, per-Kyma rates log-normal (sigma {SKEW_SIGMA:g}), busy-hour bursts "
        f"({BURST_S / 60:.0f} min of every hour at {BURST_FACTOR:g}x, the rest at "
        f"{QUIET_FACTOR:.1f}x); {trace_note}. Each configuration simulates a prefix of its "
        f"fleet's trace, ~{plan.reconcile_budget:,} reconciles at most within the span (see "
        f"the span column); {simulated:,} reconciles simulated in all, warm-ups included, "
        f"in {seconds:.1f} s wall."
    )
    targets = tuple(_target(workers, runs, plan) for workers in plan.workers)
    return BenchResult(
        name="requeue",
        title="5. Requeue economics (simulated time)",
        seconds=seconds,
        description=description,
        tables=(
            comparison_table(runs, plan),
            *(configurations_table(k, [r for r in runs if r.kymas == k]) for k in plan.fleets),
        ),
        targets=targets,
        figures={
            "plan": {
                **{k: v for k, v in asdict(plan).items() if k != "workers"},
                "workers": [w if w is not None else "one per Kyma" for w in plan.workers],
            },
            "wall_seconds": round(seconds, 2),
            "simulated_reconciles": simulated,
            "delivery_delay_p50_s": round(delay, 4),
            "delivery_delay_samples": len(delays),
            "delivery_delay_source": source,
            "traces": summaries,
            "fleets": [
                {"kymas": k, "runs": [r.to_json() for r in runs if r.kymas == k]}
                for k in plan.fleets
            ],
        },
    )
