"""The fleet benchmark at tiny size: 20 Kymas, a 10 s window, everything real.

A real KCP API server, our KLM with its listener behind the real Envoy, 20 simulated
runtimes with their own certificates in a separate load-generator process. Every event
must be answered 200 and lead to a reconcile of exactly its runtime's Kyma (KLM resolves
the runtime-id label; Kymas are not named after runtimes), and the report must build.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from harness.bench.fleet import measure_fleet
from harness.bench.fleet_report import FleetConfig, fleet_result
from harness.bench.writer import FLEET_PLOT, render_plots
from harness.clusters.binaries import Binaries
from harness.kcp.lifecycle_manager.queue.workqueue import Trigger
from harness.report.plot import PNG_SIGNATURE

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]

TINY = FleetConfig(
    kymas=20,
    events_per_runtime_hour=360.0,  # 2 events/s over 20 runtimes
    steady_s=5.0,
    burst_rate=5.0,
    burst_s=2.0,
    recovery_s=3.0,
    drain_s=10.0,
    startup_timeout_s=60.0,
)


async def test_tiny_fleet_reconciles_the_right_kyma_for_every_event(
    cluster_binaries: Binaries, tmp_path: Path
) -> None:
    del cluster_binaries  # ensured (or the test skipped) before the run starts its cluster
    run = await measure_fleet(TINY, tmp_path)

    assert run.setup["kymas"] == 20 and run.setup["startup_wave"]["reconciles"] == 20
    planned = sum(p.count for p in TINY.phases())
    events = run.window.events
    assert len(events) == planned == 26
    assert all(e.status == 200 for e in events), [e for e in events if e.status != 200]

    assert len(run.reactions) == planned
    watch = {(r.kyma, r.at) for r in run.window.reconciles if Trigger.WATCH_EVENT in r.triggers}
    for reaction in run.reactions:
        assert reaction.kyma == run.kyma_of[reaction.event.runtime_id]
        assert reaction.reconciled_at is not None, reaction
        assert (reaction.kyma, reaction.reconciled_at) in watch
        assert reaction.seconds is not None and 0 <= reaction.seconds < 5, reaction
    assert not any(k.startswith("events:dropped") for k in run.counters)

    result = fleet_result(run, seconds=1.0)
    reaction_ms = result.figures["phases"]["all"]["reaction_ms"]
    assert reaction_ms["unreconciled"] == 0 and math.isfinite(reaction_ms["p99"])
    load = result.figures["load"]
    assert load["kcp_requests_per_s"] is not None and load["kcp_requests_per_s"]["total"] > 0
    assert load["reconciles_by_trigger"]["watch-event"] >= planned - 6  # repeats may merge
    assert load["queue_depth"]["samples"] > 10
    assert all(v is not None for v in load["cpu_s"].values()), load["cpu_s"]
    assert result.targets[0].met is not None
    assert render_plots([result])[FLEET_PLOT].startswith(PNG_SIGNATURE)
