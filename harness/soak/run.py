"""One soak run: environment up, a second manager's listener as its own process, churn at
the target rate while every watcher process is sampled, then the ground-truth oracle.

**What runs.** KCP + ``skrs`` SKRs (real API servers), the Envoy gateway, the KLM
stand-in (its listener inside this process, Watcher ``klm-watcher`` on Kymas), and a
``watcher-listener`` process for ``config-manager`` (Watcher ``soak-configmaps`` on
ConfigMaps labelled ``SOAK_LABEL``). The churn writes Kymas and ConfigMaps on every SKR:
creates, spec updates, status updates (no Watcher asks for Kyma status: any such event
is spurious), label flips that move objects in and out of both Watchers' selectors, and
deletes — ``rate`` writes per second in total, spread evenly over the SKRs.

**Bounded.** The plan holds at most ``rate * duration`` writes; the churn runner sends
nothing after ``duration + 5 s``; the whole churn is cancelled after ``duration + 120 s``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import platform
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.churn.plan import ChurnMix, ChurnSpec, make_plan
from harness.churn.runner import ChurnRun, run_churn
from harness.churn.truth import Rule, Truth, ground_truth
from harness.environment import (
    KCP_NAMESPACE,
    EnvironmentSpec,
    SkrSpec,
    WatcherEnvironment,
    watcher_environment,
)
from harness.environment.spec import SKR_KYMA_LABELS
from harness.expect.match import MatchResult, ReceivedEvent, match_events
from harness.kube import Resource, request
from harness.report.stats import percentile
from harness.runner.observe import received
from harness.runner.session import LiveSession
from harness.soak.external import ExternalListener, ListenerTls
from harness.soak.model import (
    Criterion,
    Growth,
    OracleCounts,
    Sample,
    Thresholds,
    Windows,
    achieved_rate,
    decide,
    growth,
    passed,
)
from harness.soak.progress import SoakProgress
from harness.soak.sampler import Sampler, Target, command_name
from watcher.domain import WATCHED_BY_LABEL
from watcher.health.state import Policy, RuntimeHealth, State
from watcher.render.watcher_cr import klm_watcher_dict, parse_watcher, watcher_dict

SOAK_LABEL = "harness.kyma-project.io/soak"
CONFIG_MANAGER = "config-manager"
CONFIG_SERVICE = ("config-manager-events", KCP_NAMESPACE, 8084)
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap")
CHURN_SLACK = 5.0
HARD_LIMIT_EXTRA = 120.0


@dataclass(frozen=True)
class SoakConfig:
    """Knobs of one run; ``rate`` is writes per second over all SKRs together."""

    duration: float = 600.0
    rate: float = 50.0
    skrs: int = 3
    objects: int = 100
    seed: int = 6
    interval: float = 2.0
    min_warmup: float = 60.0
    settle: float = 30.0
    health_interval: float | None = 10.0
    """Watcher health's heartbeat interval during the soak (None: off); a runtime that
    leaves Healthy under churn is a false alarm and fails the run."""
    health_timeout: float = 2.0
    log_dir: Path = Path("reports/soak/logs")
    thresholds: Thresholds = field(default_factory=Thresholds)

    @property
    def windows(self) -> Windows:
        return Windows.of(self.duration, min_warmup=self.min_warmup)

    def checked_windows(self) -> Windows:
        """:attr:`windows`, or ValueError before anything starts when a window would hold
        fewer than two samples at the sampling ``interval``."""
        windows = self.windows
        if windows.first_end - windows.warmup < 2 * self.interval:
            shortest = 20 * self.interval  # windows are a tenth of the run
            raise ValueError(
                f"a {self.duration:g} s run has {windows.first_end - windows.warmup:g} s "
                f"windows, fewer than two samples at the {self.interval:g} s sampling period; "
                f"run at least {shortest:g} s or sample more often (--interval)"
            )
        return windows

    @property
    def skr_specs(self) -> tuple[SkrSpec, ...]:
        names = [f"skr-{chr(ord('a') + i)}" for i in range(self.skrs)]
        return tuple(SkrSpec(n, f"runtime-{n}", f"{n}.kyma.example.com") for n in names)

    def churn_spec(self) -> ChurnSpec:
        watched = {WATCHED_BY_LABEL: SKR_KYMA_LABELS[WATCHED_BY_LABEL], SOAK_LABEL: "on"}
        return ChurnSpec(
            clusters=tuple(s.name for s in self.skr_specs),
            kinds=("kymas", "configmaps"),
            mix=ChurnMix(create=1, spec_update=3, status_update=1, label_flip=1, delete=1),
            objects=self.objects,
            rate=self.rate / self.skrs,
            duration=self.duration,
            seed=self.seed,
            labels=watched,
            flip_labels=watched,
            name_prefix="soak",
        )


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


def soak_watcher() -> dict[str, Any]:
    return watcher_dict(
        "soak-configmaps",
        namespace=KCP_NAMESPACE,
        manager=CONFIG_MANAGER,
        resource=("", "v1", "configmaps"),
        field="spec",
        labels_to_watch={SOAK_LABEL: "on"},
        service=CONFIG_SERVICE,
    )


def rules() -> tuple[Rule, ...]:
    return tuple(Rule.from_watcher(parse_watcher(w)) for w in (klm_watcher_dict(), soak_watcher()))


async def wait_configmaps_wired(env: WatcherEnvironment, within: float = 30.0) -> None:
    """Until every SKR API server calls a webhook for a labelled ConfigMap.

    ``apply_watcher`` proves the Kyma webhook is live; the ConfigMap webhook arrives in the
    same configuration but is probed on its own: a dry-run create (nothing is stored; the
    event it may cause names an object the churn never writes, which the oracle ignores).
    """
    probe = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "soak-probe", "namespace": "default", "labels": {SOAK_LABEL: "on"}},
    }
    async with asyncio.timeout(within):
        for inst in env.fleet:
            api = env.skr_apis[inst.cluster.name]
            before = await inst.metric("watcher_admission_request_total")
            while await inst.metric("watcher_admission_request_total") <= before:
                await request(
                    api, "POST", CONFIGMAPS.path("default"), query=[("dryRun", "All")], body=probe
                )
                await asyncio.sleep(0.05)


def listener_tls(env: WatcherEnvironment, component: str) -> ListenerTls | None:
    """The mesh certificates for a listener behind ``CONFIG_SERVICE``, if the environment
    runs the gateway → listener hop over mTLS (``env.mesh``), else None (plain HTTP)."""
    mesh: Any = getattr(env, "mesh", None)
    if mesh is None:
        return None
    cert, key = mesh.issue_listener(component, CONFIG_SERVICE[:2])
    return ListenerTls(Path(cert), Path(key), Path(mesh.ca_file))


def targets(env: WatcherEnvironment, ext: ExternalListener) -> list[Target]:
    out = [Target(f"webhook/{inst.cluster.name}", "watcher", _pid_of(inst)) for inst in env.fleet]
    out.append(Target(f"listener/{CONFIG_MANAGER}", "watcher", lambda: ext.pid))
    out.append(Target("envoy", "watcher", lambda: env.gateway.pid))
    out.append(Target("harness (KLM listener in-process)", "info", os.getpid))
    return out


def _pid_of(inst: Any) -> Any:
    return lambda: inst.pid


def all_received(env: WatcherEnvironment, ext: ExternalListener, since: float) -> list[Any]:
    events: list[ReceivedEvent] = [*(received(e) for e in env.events), *ext.collect()]
    return [e for e in events if e.received_at >= since]


async def settle(
    truth: Truth, env: WatcherEnvironment, ext: ExternalListener, since: float, within: float
) -> MatchResult:
    """Match until nothing is missing (plus a short grace for late extras) or ``within``."""
    deadline = time.monotonic() + within
    while True:
        result = match_events(truth, all_received(env, ext, since))
        if not result.missing or time.monotonic() >= deadline:
            break
        await asyncio.sleep(0.5)
    await asyncio.sleep(1.0)  # an event in flight at the last look still counts
    return match_events(truth, all_received(env, ext, since))


def oracle_counts(
    planned: int, run: ChurnRun, truth: Truth, result: MatchResult, events: int
) -> OracleCounts:
    return OracleCounts(
        writes_planned=planned,
        writes_sent=len(run.executed),
        writes_failed=len(run.failed),
        writes_skipped=len(run.skipped),
        send_decisions=sum(e.required for e in truth.expected),
        groups=sum(1 for e in truth.expected if e.required),
        events_received=events,
        matched=result.matched,
        missing=len(result.missing),
        spurious=len(result.spurious),
        duplicates=len(result.duplicates),
        wrong_listener=len(result.wrong_listener),
        wrong_runtime=len(result.wrong_runtime),
    )


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


def _false_alarms(alarms: list[str]) -> Callable[[str, RuntimeHealth, RuntimeHealth], None]:
    """A transition callback noting every runtime that leaves Healthy (or Unknown) for
    Degraded or Broken: under churn alone, with every part up, that is a false alarm."""

    def note(runtime_id: str, before: RuntimeHealth, after: RuntimeHealth) -> None:
        if after.state in (State.DEGRADED, State.BROKEN):
            alarms.append(f"{runtime_id}: {after.state.value} ({after.reason.value})")

    return note


def _health_criterion(env: WatcherEnvironment, alarms: Sequence[str]) -> Criterion | None:
    if env.health is None:
        return None
    monitor = env.health.monitor
    statuses = monitor.snapshot()
    healthy = sum(1 for s in statuses if s.health.state is State.HEALTHY)
    echoes = int(monitor.metrics.value("watcher_health_echoes_total"))
    return Criterion(
        "watcher health: no false alarm",
        not alarms and healthy == len(statuses) > 0,
        "no runtime Degraded or Broken under churn; every runtime Healthy at the end",
        f"{len(alarms)} alarm(s){': ' + '; '.join(alarms[:5]) if alarms else ''}; "
        f"{healthy}/{len(statuses)} Healthy, {echoes} heartbeats echoed "
        f"(interval {monitor.policy.interval:g} s)",
    )


async def run_soak(config: SoakConfig, progress: SoakProgress | None = None) -> SoakResult:
    """Run one soak (see the module doc) and judge it."""
    progress = progress or SoakProgress()
    windows = config.checked_windows()  # fails early: no room for the windows or samples
    plan = make_plan(config.churn_spec())
    started_at = time.time()
    progress.phase(f"starting KCP + {config.skrs} SKRs, gateway, listeners")
    health = (
        Policy(interval=config.health_interval, timeout=config.health_timeout)
        if config.health_interval
        else None
    )
    spec = EnvironmentSpec(skrs=config.skr_specs, log_dir=config.log_dir, health=health)
    alarms: list[str] = []
    async with watcher_environment(spec) as env:
        if env.health is not None:
            env.health.monitor.on_transition.append(_false_alarms(alarms))
        ext_log = config.log_dir / f"watcher-listener-{CONFIG_MANAGER}.log"
        tls = listener_tls(env, CONFIG_MANAGER)
        async with ExternalListener(CONFIG_MANAGER, ext_log, tls=tls) as ext:
            name, namespace, port = CONFIG_SERVICE
            env.registry.register(name, namespace, port, ("127.0.0.1", ext.port))
            await env.apply_watcher(soak_watcher())
            await wait_configmaps_wired(env)
            session = LiveSession(env)
            found = targets(env, ext)
            processes = tuple(
                ProcessInfo(t.name, t.role, pid, command_name(pid) if pid else "")
                for t in found
                for pid in [t.pid()]
            )
            sampler = Sampler(
                found,
                interval=config.interval,
                on_sample=lambda batch: progress.sampled(
                    batch, len(env.events) + len(ext.collect())
                ),
            )
            progress.phase(
                f"churn: {len(plan)} writes at {config.rate:g}/s for {config.duration:g} s"
            )
            progress.start(len(plan))
            churn_start = time.time()
            sampler.origin = churn_start
            try:
                async with sampler:
                    async with asyncio.timeout(config.duration + HARD_LIMIT_EXTRA):
                        run = await run_churn(
                            plan,
                            session.write,
                            duration=config.duration,
                            slack=CHURN_SLACK,
                            max_in_flight=16,
                            on_executed=lambda item: progress.wrote(item.ok),
                        )
                    elapsed = time.time() - churn_start
                    sampler.tick()  # a reading at the very end of the last window
                    ext.collect()
            finally:
                progress.close()
            progress.phase("churn done; checking events against the ground truth")
            truth = ground_truth(run.executed, rules(), {s.name: s.runtime_id for s in spec.skrs})
            result = await settle(truth, env, ext, churn_start, config.settle)
            events = len(all_received(env, ext, churn_start)) - result.ignored
            health_verdict = _health_criterion(env, alarms)
    samples = tuple(sampler.samples)
    growths = tuple(growth(samples, windows, t.name, t.role) for t in found)
    oracle = oracle_counts(len(plan), run, truth, result, events)
    achieved = achieved_rate(oracle.writes_ok, config.duration, elapsed)
    criteria = decide(
        oracle, growths, target_rate=config.rate, achieved=achieved, thresholds=config.thresholds
    )
    if health_verdict is not None:
        criteria = (*criteria, health_verdict)
    return SoakResult(
        config=config,
        started_at=started_at,
        elapsed=elapsed,
        achieved_rate=achieved,
        samples=samples,
        processes=processes,
        growths=growths,
        oracle=oracle,
        latency_ms=latency_summary(result.latency_values),
        criteria=criteria,
        findings=tuple(f.describe() for f in result.findings[:20]),
        machine=machine(),
        listener_hop="plain HTTP" if tls is None else "mTLS",
    )


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
