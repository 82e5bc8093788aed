"""A sample run report built the way the runner builds one (shared by the report tests)."""

from __future__ import annotations

import itertools
import random
from pathlib import Path

from hypothesis import strategies as st

from harness.report import (
    Branch,
    MachineInfo,
    ProcessInfo,
    ReportBuilder,
    RunReport,
    Status,
    TimelineEntry,
    TimelineKind,
)

timeline_entries = st.builds(
    TimelineEntry,
    at=st.floats(allow_nan=False, allow_infinity=False, width=64),
    kind=st.sampled_from(TimelineKind),
    source=st.text(max_size=20),
    object=st.text(max_size=20),
    detail=st.text(max_size=20),
)
"""Any timeline entry (for JSON round trips of scenarios and attempts)."""


def make_sample_report(log_dir: Path, *, timeline_entries: int = 40) -> RunReport:
    """A deterministic report: ``spec-watch`` passes, ``kcp-outage`` fails, ``setup`` errors.

    Process logs are written to ``log_dir``; an object name carries ``<script>`` so writers
    that forget to escape are caught.
    """
    ticks = itertools.count()
    clock = lambda: 1_760_000_000.0 + next(ticks) * 0.25  # noqa: E731
    rng = random.Random(7)
    builder = ReportBuilder(
        "run-20260101-abc",
        machine=MachineInfo(cores=2, python="3.11.7", versions={"kube-apiserver": "v1.36.3"}),
        clock=clock,
    )

    ok = builder.scenario("spec-watch", "scenarios/spec-watch.yaml")
    ok.step("apply-watcher", Status.PASSED, 0.8)
    ok.step("churn", Status.PASSED, 5.0)
    for i in range(timeline_entries):
        ok.event(TimelineKind.MUTATION, "skr-a", f"default/ConfigMap/cm-{i}", "spec.data changed")
        ok.event(TimelineKind.EVENT, "klm", f"default/ConfigMap/cm-{i}", "runtime skr-a")
    ok.latencies(rng.lognormvariate(3.0, 0.4) for _ in range(300))
    ok.expectation(
        step="expect-events",
        kind="events",
        description="klm receives one event per spec change of a watched ConfigMap",
        expected="exactly 40",
        actual="40",
        passed=True,
        duration=1.2,
    )
    ok.expectation(
        step="expect-events",
        kind="latency",
        description="delivery latency p99 below 200 ms",
        expected="p99 < 200 ms",
        actual="p99 = 48.1 ms",
        passed=True,
    )
    ok.set_metrics({'watcher_requests_total{result="ok"}': 40.0})
    ok.finish()

    log = log_dir / "gateway.log"
    log.write_text("".join(f"line {i}: upstream ok\n" for i in range(300)) + "\x1b[31mboom\n")
    bad = builder.scenario("kcp-outage", "scenarios/kcp-outage.yaml")
    bad.event(TimelineKind.FAULT, "kcp", "gateway", "stop")
    bad.event(TimelineKind.MUTATION, "skr-a", "default/ConfigMap/<script>alert(1)</script>", "")
    bad.event(TimelineKind.RECONCILE, "klm", "kyma-system/Kyma/kyma-a", "trigger=event")
    bad.step("stop-gateway", Status.PASSED, 0.3)
    bad.step("expect-nothing-lost", Status.FAILED, 30.0, error="2 events missing")
    bad.step("start-gateway", Status.PASSED, 1.1, branch=Branch.FINALLY)
    bad.expectation(
        step="expect-nothing-lost",
        kind="events",
        description="every mutation reaches klm after recovery",
        expected="exactly 12",
        actual="10 (missing: default/ConfigMap/cm-3, default/ConfigMap/cm-7)",
        passed=False,
        duration=30.0,
    )
    bad.expectation(
        step="expect-nothing-lost",
        kind="metric",
        description='watcher_failed_kcp_total{error_reason="failed-request"} == 0',
        expected="== 0",
        actual="== 0",
        passed=True,
    )
    bad.process(
        ProcessInfo(
            name="gateway",
            pid=4242,
            argv=("envoy", "-c", "envoy.yaml"),
            exit_code=-15,
            log_path=log,
        )
    )
    bad.process(
        ProcessInfo(
            name="listener",
            pid=None,
            argv=("watcher-listener",),
            exit_code=None,
            log_path=log_dir / "missing.log",
        )
    )
    bad.finish()

    setup = builder.scenario("foreign-ca", "scenarios/foreign-ca.yaml")
    setup.finish(error="etcd not ready after 20 s (exited 1); full log: /tmp/etcd.log")
    return builder.build()
