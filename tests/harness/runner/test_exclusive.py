"""Latency-measuring items run alone; everything else shares the machine."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from harness.runner.exclusive import measures_latency, turn
from harness.scenario import loads_scenario

HEAD = """
name: s
clusters: {skrs: [{name: skr-a}]}
steps:
  - name: one
    try:
"""


def test_a_latency_or_write_bound_makes_a_scenario_exclusive() -> None:
    churn = "      - churn: {clusters: [skr-a], kinds: [kymas], duration: 1s}\n"
    latency = HEAD + churn + "      - expect: {latency: {p99: 1s}}\n"
    writes = HEAD + churn + "      - expect: {writes: {cluster: skr-a, p99: 200ms}}\n"
    failed_only = (
        HEAD + churn + "      - expect: {writes: {cluster: skr-a, failed: {atLeast: 1}}}\n"
    )
    assert measures_latency(loads_scenario(latency))
    assert measures_latency(loads_scenario(writes))
    assert not measures_latency(loads_scenario(failed_only))
    assert not measures_latency(loads_scenario(HEAD + "      - wait: 1s\n"))


def test_an_exclusive_item_waits_for_running_ones_and_holds_back_new_ones(
    tmp_path: Path,
) -> None:
    log: list[str] = []
    running = threading.Event()

    def item(name: str, exclusive: bool, hold: float, started: threading.Event | None) -> None:
        with turn(tmp_path, exclusive=exclusive):
            log.append(f"{name} in")
            if started is not None:
                started.set()
            time.sleep(hold)
            log.append(f"{name} out")

    shared = threading.Thread(target=item, args=("shared", False, 0.3, running))
    shared.start()
    running.wait()
    alone = threading.Thread(target=item, args=("alone", True, 0.2, None))
    alone.start()
    time.sleep(0.05)  # the exclusive item now waits in the turnstile
    late = threading.Thread(target=item, args=("late", False, 0.0, None))
    late.start()
    for t in (shared, alone, late):
        t.join(timeout=5)
    assert log == ["shared in", "shared out", "alone in", "alone out", "late in", "late out"]
