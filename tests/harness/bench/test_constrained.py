"""The 100m benchmark's pure parts: cgroup values, cpu.stat, row arithmetic, cleanup.

The cgroup is exercised on a fake root under ``tmp_path`` (a plain directory: the control
files become regular files, which the test removes the way the kernel would allow); one
test uses the real cgroup-v1 ``cpu`` controller when this machine has a writable one.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from harness.bench import constrained
from harness.bench.common import BenchContext
from harness.bench.constrained import (
    CPU_ROOT,
    CgroupError,
    CpuLimit,
    CpuStat,
    kept_up,
    paced_rate,
    paced_table,
    quota_us,
    sustained_figures,
    sustained_table,
    times_upstream,
    unavailable_reason,
)

STAT = "nr_periods 40\nnr_throttled 30\nthrottled_time 2500000000\nnr_bursts 0\nburst_time 0\n"


def fake_root(tmp_path: Path) -> Path:
    root = tmp_path / "cpu"
    root.mkdir()
    (root / "cpu.cfs_quota_us").write_text("-1\n")
    (root / "cgroup.procs").write_text("")
    return root


def test_upstreams_limit_is_a_tenth_of_each_period() -> None:
    assert quota_us(100) == 10_000
    assert quota_us(250, 200_000) == 50_000
    with pytest.raises(ValueError, match="millicores"):
        quota_us(0)


def test_cpu_stat_parses_and_subtracts() -> None:
    before = CpuStat.parse("nr_periods 10\nnr_throttled 5\nthrottled_time 500000000\n")
    after = CpuStat.parse(STAT)
    assert after == CpuStat(40, 30, 2.5)
    delta = after - before
    assert delta == CpuStat(30, 25, 2.0)
    assert delta.to_json() == {
        "nr_periods": 30,
        "nr_throttled": 25,
        "throttled_s": 2.0,
        "throttled_share": 0.833,
    }
    assert CpuStat().to_json()["throttled_share"] is None


def test_unavailable_reasons(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reason = unavailable_reason(tmp_path / "absent")
    assert reason is not None and "no cgroup-v1 cpu controller" in reason
    plain = tmp_path / "plain"
    plain.mkdir()
    reason = unavailable_reason(plain)
    assert reason is not None and "cpu.cfs_quota_us" in reason
    root = fake_root(tmp_path)
    assert unavailable_reason(root) is None
    monkeypatch.setattr(os, "access", lambda *_: False)
    reason = unavailable_reason(root)
    assert reason is not None and "not writable" in reason


def test_the_cgroup_is_configured_and_removed_even_when_the_body_fails(tmp_path: Path) -> None:
    root = fake_root(tmp_path)
    limit = CpuLimit(100, root=root)
    with pytest.raises(RuntimeError, match="measurement failed"), limit:
        assert (limit.path / "cpu.cfs_period_us").read_text() == "100000"
        assert (limit.path / "cpu.cfs_quota_us").read_text() == "10000"
        argv = limit.wrap(["/x/watcher-webhook", "--a b"])
        assert argv[:2] == ["/bin/sh", "-c"]
        assert argv[2] == f"echo $$ > {limit.path}/cgroup.procs && exec /x/watcher-webhook '--a b'"
        for control in limit.path.iterdir():  # what the kernel's rmdir ignores
            control.unlink()
        raise RuntimeError("measurement failed")
    assert not limit.path.exists()
    assert sorted(p.name for p in root.iterdir()) == ["cgroup.procs", "cpu.cfs_quota_us"]
    limit.remove()  # idempotent


def test_a_cgroup_that_cannot_be_removed_is_reported(tmp_path: Path) -> None:
    limit = CpuLimit(100, root=fake_root(tmp_path), settle_s=0.1)
    with pytest.raises(CgroupError, match="cannot remove cgroup"), limit:
        (limit.path / "cgroup.procs").write_text("")  # empty: nothing to evacuate
    for control in limit.path.iterdir():
        control.unlink()
    limit.remove()
    assert not limit.path.exists()


def test_a_root_that_refuses_the_cgroup_is_a_cgroup_error(tmp_path: Path) -> None:
    with pytest.raises(CgroupError, match="cannot create cgroup"), CpuLimit(root=tmp_path / "x"):
        pass


def test_each_cpu_limit_gets_its_own_name(tmp_path: Path) -> None:
    a, b = CpuLimit(root=tmp_path), CpuLimit(root=tmp_path)
    assert a.path != b.path
    assert str(os.getpid()) in a.path.name


@pytest.mark.skipif(
    unavailable_reason(CPU_ROOT) is not None, reason="no writable cgroup-v1 cpu controller"
)
def test_a_wrapped_command_runs_inside_the_real_cgroup() -> None:
    with CpuLimit(100) as limit:
        assert int((limit.path / "cpu.cfs_quota_us").read_text()) == 10_000
        out = subprocess.run(
            limit.wrap(["cat", "/proc/self/cgroup"]),
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
        assert f"/{limit.path.name}" in out
        assert limit.pids() == []  # it exited
        assert limit.stat().periods >= 0
    assert not limit.path.exists()


def test_paced_rate_is_half_the_sustained_within_bounds() -> None:
    assert paced_rate(270.0) == 20.0
    assert paced_rate(13.0) == 6.5
    assert paced_rate(0.5) == 1.0


def test_the_queue_keeps_up_when_at_most_a_second_of_deliveries_waits() -> None:
    assert kept_up(2000, 1900, 10.0)  # 100 queued, 190 delivered per second
    assert not kept_up(3000, 900, 10.0)
    assert kept_up(20, 5, 10.0)  # a handful in flight is no backlog


def test_sustained_figures_per_mode() -> None:
    sync = sustained_figures(
        mode="sync",
        admitted=410,
        window_s=10.0,
        accepted_in_window=410,
        accepted_after_drain=410,
        drain_s=0.0,
    )
    assert sync["events_per_s"] == 41.0
    assert sync["admissions_per_s"] == 41.0
    assert "queue_kept_up" not in sync
    pressed = sustained_figures(
        mode="async",
        admitted=3000,
        window_s=10.0,
        accepted_in_window=900,
        accepted_after_drain=2500,
        drain_s=8.0,
    )
    assert pressed["events_per_s"] == 90.0
    assert pressed["backlog_at_window_end"] == 2100
    assert pressed["queue_kept_up"] is False
    assert pressed["events_lost"] == 500
    with pytest.raises(ValueError, match="window"):
        sustained_figures(
            mode="sync",
            admitted=0,
            window_s=0.0,
            accepted_in_window=0,
            accepted_after_drain=0,
            drain_s=0.0,
        )


def test_times_upstream_uses_the_issues_figures() -> None:
    assert times_upstream(205.0, 2048) == 5.0
    assert times_upstream(55.0, 4096) == 5.0
    assert times_upstream(55.0, 3072) is None


def _row(mode: str, bits: int, events_per_s: float, *, paced: bool = True) -> dict[str, Any]:
    stat = CpuStat(100, 90, 6.0).to_json()
    sustained = sustained_figures(
        mode=mode,
        admitted=int(events_per_s * 10),
        window_s=10.0,
        accepted_in_window=int(events_per_s * 10),
        accepted_after_drain=int(events_per_s * 10),
        drain_s=0.0,
    )
    return {
        "label": f"{mode} {bits}",
        "delivery_mode": mode,
        "rsa_bits": bits,
        "in_flight": constrained.IN_FLIGHT,
        "sustained": {
            **sustained,
            "admission_latency_at_saturation": {"p99_ms": 90.0},
            "webhook_cores_used": 0.1,
            "cpu_stat": stat,
            "times_upstream": times_upstream(sustained["events_per_s"], bits),
        },
        "paced": (
            {
                "rate_per_s": 20.0,
                "achieved_per_s": 20.1,
                "samples": 200,
                "p50_ms": 2.0,
                "p99_ms": 50.0,
                "max_ms": 60.0,
                "cpu_stat": stat,
            }
            if paced
            else None
        ),
    }


def test_tables_from_rows() -> None:
    rows = [_row("async", 2048, 250.0), _row("async", 4096, 240.0), _row("sync", 2048, 40.0)]
    rows.append(_row("async", 2048, 90.0, paced=False) | {"in_flight": 16})
    table = sustained_table(rows, 10.0)
    assert len(table.rows) == len(rows) + 2  # + upstream's two reference rows
    assert table.rows[0][2] == 250.0 and table.rows[0][3] == 6.1
    assert table.rows[0][8] == "90 of 100 (90%)"
    assert len(paced_table(rows).rows) == 3  # the pressed row has no latency part


def test_without_a_cpu_controller_the_row_is_not_measurable(tmp_path: Path) -> None:
    ctx = BenchContext(quick=True, workdir=tmp_path)
    result = asyncio.run(constrained.run_constrained(ctx, root=tmp_path / "no-cgroup"))
    assert result.error == ""
    assert result.figures["measurable"] is False
    assert "no cgroup-v1 cpu controller" in result.figures["reason"]
    assert result.targets == ()
    assert all("not measurable" in str(row[2]) for row in result.tables[0].rows)
