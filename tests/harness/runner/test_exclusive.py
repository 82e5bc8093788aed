"""Latency-measuring items run alone; everything else shares the machine."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from harness.runner.exclusive import may_start, measures_latency, turn
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


def test_beside_an_exclusive_item_runs_at_most_one_other(tmp_path: Path) -> None:
    """Four workers: 0 and 1 run long items; 2 gets an exclusive one, which waits for one
    of them; meanwhile worker 3 starts nothing, worker 0 goes on."""
    log: list[str] = []
    started = {name: threading.Event() for name in ("w0", "w1")}

    def item(name: str, worker: int, exclusive: bool, hold: float) -> None:
        with turn(tmp_path, worker, exclusive=exclusive):
            log.append(f"{name} in")
            if name in started:
                started[name].set()
            time.sleep(hold)
            log.append(f"{name} out")

    threads = [
        threading.Thread(target=item, args=("w0", 0, False, 0.6)),
        threading.Thread(target=item, args=("w1", 1, False, 0.2)),
    ]
    for t in threads:
        t.start()
    for event in started.values():
        event.wait()
    alone = threading.Thread(target=item, args=("ex", 2, True, 0.2))
    alone.start()
    time.sleep(0.3)  # w1 is done; the exclusive item has taken its slot and worker 3's
    late = threading.Thread(target=item, args=("w3", 3, False, 0.0))
    late.start()
    for t in (*threads, alone, late):
        t.join(timeout=5)
    assert log.index("ex in") > log.index("w1 out")  # waited for one of the two
    assert log.index("ex in") < log.index("w0 out")  # not for both
    assert log.index("w3 in") > log.index("ex out")  # its slot was held meanwhile


def test_two_exclusive_items_may_run_together_and_nothing_else_beside() -> None:
    assert may_start({0: True}, set(), 1, exclusive=True)
    assert not may_start({0: True, 1: True}, set(), 2, exclusive=False)
    assert not may_start({0: True, 1: False}, set(), 2, exclusive=True)
    assert may_start({0: False, 1: False, 2: False}, set(), 3, exclusive=False)


def test_a_waiting_exclusive_item_is_not_overtaken() -> None:
    assert not may_start({0: False}, {2}, 1, exclusive=False)
    assert may_start({0: False}, {2}, 2, exclusive=True)
    assert not may_start({0: False, 1: False}, {2}, 2, exclusive=True)  # waits for one


def test_nothing_else_starts_before_every_exclusive_item_has() -> None:
    assert not may_start({}, set(), 3, exclusive=False, unstarted=1)
    assert may_start({0: True}, set(), 1, exclusive=True, unstarted=1)
    assert may_start({0: True}, set(), 1, exclusive=False, unstarted=0)


def test_a_worker_that_came_up_first_waits_for_the_exclusive_items(tmp_path: Path) -> None:
    """Worker 1's ordinary item comes first but waits until worker 0's exclusive item has
    started (and, beside it, may then run)."""
    log: list[str] = []
    ids = {"excl"}

    def item(name: str, worker: int, exclusive: bool, delay: float) -> None:
        time.sleep(delay)
        with turn(tmp_path, worker, exclusive=exclusive, item=name, exclusive_items=ids):
            log.append(f"{name} in")
            time.sleep(0.2)

    ordinary = threading.Thread(target=item, args=("ordinary", 1, False, 0.0))
    exclusive = threading.Thread(target=item, args=("excl", 0, True, 0.3))
    for t in (ordinary, exclusive):
        t.start()
    for t in (ordinary, exclusive):
        t.join(timeout=5)
    assert log == ["excl in", "ordinary in"]
