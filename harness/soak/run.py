"""One soak run: environment up, a second manager's listener as its own process, churn at
the target rate while every watcher process is sampled, then the ground-truth oracle.

Bounded: the plan holds at most ``rate * duration`` writes; the churn runner sends nothing
after ``duration + 5 s``; the whole churn is cancelled after ``duration + 120 s``.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from harness.churn.plan import make_plan
from harness.churn.runner import ChurnRun, run_churn
from harness.churn.truth import Truth, ground_truth
from harness.environment import EnvironmentSpec, WatcherEnvironment, watcher_environment
from harness.expect.match import MatchResult, ReceivedEvent, match_events
from harness.kcp.listener_process import (
    ListenerProcess,
    ListenerTls,
    ours_command,
    without_listener_settings,
)
from harness.kube import CONFIG_MAPS, request
from harness.runner.observe import received
from harness.runner.session import LiveSession
from harness.soak.config import (
    CONFIG_MANAGER,
    CONFIG_SERVICE,
    SOAK_LABEL,
    SoakConfig,
    rules,
    soak_watcher,
)
from harness.soak.model import Criterion, OracleCounts, achieved_rate, decide, growth
from harness.soak.progress import SoakProgress
from harness.soak.result import ProcessInfo, SoakResult, latency_summary, machine
from harness.soak.sampler import Sampler, Target, command_name
from watcher.health.state import Policy, RuntimeHealth, State

CHURN_SLACK = 5.0
HARD_LIMIT_EXTRA = 120.0


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
                    api, "POST", CONFIG_MAPS.path("default"), query=[("dryRun", "All")], body=probe
                )
                await asyncio.sleep(0.05)


def listener_tls(env: WatcherEnvironment, component: str) -> ListenerTls | None:
    """The mesh certificates for a listener behind ``CONFIG_SERVICE``, if the environment
    runs the gateway → listener hop over mTLS (``env.mesh``), else None (plain HTTP)."""
    if env.mesh is None:
        return None
    cert, key = env.mesh.issue_listener(component, CONFIG_SERVICE[:2])
    return ListenerTls(cert, key, env.mesh.ca_file)


def targets(env: WatcherEnvironment, listener: ListenerProcess) -> list[Target]:
    out = [Target(f"webhook/{inst.cluster.name}", "watcher", _pid_of(inst)) for inst in env.fleet]
    out.append(Target(f"listener/{CONFIG_MANAGER}", "watcher", lambda: listener.pid))
    out.append(Target("envoy", "watcher", lambda: env.gateway.pid))
    out.append(Target("harness (KLM listener in-process)", "info", os.getpid))
    return out


def _pid_of(inst: Any) -> Any:
    return lambda: inst.pid


def all_received(env: WatcherEnvironment, since: float) -> list[ReceivedEvent]:
    """Every listener's events since ``since``, ``config-manager``'s process included."""
    return [received(e) for e in env.events_since(since)]


async def settle(truth: Truth, env: WatcherEnvironment, since: float, within: float) -> MatchResult:
    """Match until nothing is missing (plus a short grace for late extras) or ``within``."""
    deadline = time.monotonic() + within
    while True:
        result = match_events(truth, all_received(env, since))
        if not result.missing or time.monotonic() >= deadline:
            break
        await asyncio.sleep(0.5)
    await asyncio.sleep(1.0)  # an event in flight at the last look still counts
    return match_events(truth, all_received(env, since))


def config_listener(env: WatcherEnvironment, log_dir: Path) -> ListenerProcess:
    """``config-manager``'s listener: our ``watcher-listener`` as its own process, its
    events recorded with every other listener's."""
    tls = listener_tls(env, CONFIG_MANAGER)
    return ListenerProcess(
        CONFIG_MANAGER,
        env.log.recorder(CONFIG_MANAGER).consume,
        command=ours_command(tls),
        log_path=log_dir / f"watcher-listener-{CONFIG_MANAGER}.log",
        implementation="ours",
        metrics_on_own_port=False,
        serves_tls=tls is not None,
        env=without_listener_settings(os.environ),
    )


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
        async with config_listener(env, config.log_dir) as listener:
            name, namespace, port = CONFIG_SERVICE
            env.registry.register(name, namespace, port, ("127.0.0.1", listener.port))
            await env.apply_watcher(soak_watcher())
            await wait_configmaps_wired(env)
            session = LiveSession(env)
            found = targets(env, listener)
            processes = tuple(
                ProcessInfo(t.name, t.role, pid, command_name(pid) if pid else "")
                for t in found
                for pid in [t.pid()]
            )
            sampler = Sampler(
                found,
                interval=config.interval,
                on_sample=lambda batch: progress.sampled(batch, len(env.events)),
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
            finally:
                progress.close()
            progress.phase("churn done; checking events against the ground truth")
            truth = ground_truth(run.executed, rules(), {s.name: s.runtime_id for s in spec.skrs})
            result = await settle(truth, env, churn_start, config.settle)
            events = len(all_received(env, churn_start)) - result.ignored
            health_verdict = _health_criterion(env, alarms)
            hop = "plain HTTP" if env.mesh is None else "mTLS"
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
        listener_hop=hop,
    )
