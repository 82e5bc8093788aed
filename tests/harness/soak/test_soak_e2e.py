"""The soak machinery end to end, short: 20 s of churn at 20 writes/s over 3 SKRs.

Real processes (API servers, Envoy, three webhooks, a ``watcher-listener``); the oracle
must find nothing missing, spurious, duplicated or misrouted, the sampler must have read
every watcher process throughout, and the report files must be written. Growth over 20 s
says little, so the memory criteria are only checked for being computed, not for passing
(``make soak`` is the measurement).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.soak.cli import write_outputs
from harness.soak.config import SoakConfig
from harness.soak.plot import PNG_SIGNATURE
from harness.soak.progress import SoakProgress
from harness.soak.run import run_soak

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(240)]


async def test_short_soak_is_oracle_clean_and_samples_every_process(tmp_path: Path) -> None:
    config = SoakConfig(
        duration=20, rate=20, objects=20, interval=1, min_warmup=4, log_dir=tmp_path / "logs"
    )
    result = await run_soak(config, SoakProgress())
    oracle = result.oracle
    assert oracle.writes_planned == 3 * (20 * 20 // 3)  # floor(rate per SKR x duration)
    assert oracle.writes_failed == 0 and oracle.writes_skipped == 0
    assert oracle.groups > 50 and oracle.events_received >= oracle.groups
    assert oracle.matched == oracle.groups
    assert (oracle.missing, oracle.spurious, oracle.duplicates, oracle.wrong_routing) == (
        0,
        0,
        0,
        0,
    )
    assert result.latency_ms["count"] > 0
    assert result.achieved_rate > 15

    judged = {g.process: g for g in result.growths if g.role == "watcher"}
    assert set(judged) == {
        "webhook/skr-a",
        "webhook/skr-b",
        "webhook/skr-c",
        "listener/config-manager",
        "envoy",
    }
    for g in judged.values():
        assert g.samples >= 15, g
        assert not g.restarted, g
        assert g.rss_growth is not None and g.fd_growth is not None, g
        assert g.rss_start is not None and g.rss_start > 5 * 1024 * 1024, g
        assert g.fd_floor_start is not None and g.fd_floor_start >= 3, g
        assert g.conn_peak_start is not None and g.conn_peak_start >= 1, g  # keep-alive
    commands = {p.name: p.command for p in result.processes}
    assert commands["envoy"] == "envoy"
    names = {c.name for c in result.criteria}
    assert {
        "webhook/skr-a: RSS growth",
        "envoy: fd growth (excl. connections)",
        "write rate",
    } <= names

    doc = write_outputs(result, tmp_path / "docs", "pytest")
    assert (tmp_path / "docs" / "soak-rss.png").read_bytes().startswith(PNG_SIGNATURE)
    assert "## Criteria" in (tmp_path / "docs" / "soak.md").read_text()
    assert json.loads((tmp_path / "docs" / "soak.json").read_text())["oracle"] == doc["oracle"]
