"""The churn runner with a fake write and a fake clock (real asyncio, no cluster)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from harness.churn.model import ExecutedMutation, Mutation
from harness.churn.plan import ChurnMix, ChurnSpec, make_plan
from harness.churn.runner import run_churn

pytestmark = pytest.mark.usefixtures("no_leaked_tasks")


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds
        await asyncio.sleep(0)


def plan(**kwargs: Any) -> list[Mutation]:
    base: dict[str, Any] = {"clusters": ("skr-a",), "objects": 3, "rate": 10, "duration": 1}
    return make_plan(ChurnSpec(**{**base, **kwargs}))


async def test_runs_every_mutation_at_its_offset() -> None:
    clock = FakeClock()
    mutations = plan()
    seen: list[tuple[int, float]] = []

    async def write(m: Mutation) -> None:
        seen.append((m.id, clock()))
        clock.now += 0.01

    run = await run_churn(mutations, write, clock=clock, sleep=clock.sleep)
    assert [e.id for e in run.executed] == [m.id for m in mutations]
    assert all(e.ok for e in run.executed) and run.skipped == ()
    for (_, sent), m in zip(seen, mutations, strict=True):
        assert sent >= run.started_at + m.at - 1e-9
    assert all(e.acked_at >= e.sent_at for e in run.executed)
    assert [dict(e.labels_after) for e in run.executed] == [dict(m.labels_after) for m in mutations]


async def test_a_failing_write_is_recorded_and_the_churn_goes_on() -> None:
    clock = FakeClock()
    mutations = plan()
    recorded: list[ExecutedMutation] = []

    async def write(m: Mutation) -> None:
        if m.id == 2:
            raise RuntimeError("409 Conflict")

    run = await run_churn(
        mutations, write, clock=clock, sleep=clock.sleep, on_executed=recorded.append
    )
    assert len(run.executed) == len(mutations) == len(recorded)
    (failed,) = run.failed
    assert failed.id == 2 and failed.error == "RuntimeError: 409 Conflict"
    assert dict(failed.labels_after) == dict(failed.labels_before)


async def test_labels_come_from_the_answer_and_carry_over() -> None:
    clock = FakeClock()
    mix = ChurnMix(create=1, spec_update=1, status_update=0, label_flip=0, delete=0)
    mutations = plan(objects=1, mix=mix)

    async def write(m: Mutation) -> dict[str, Any]:
        return {"metadata": {"labels": {"from": "server"}}}

    run = await run_churn(mutations, write, clock=clock, sleep=clock.sleep)
    assert all(dict(e.labels_after) == {"from": "server"} for e in run.executed)
    assert all(dict(e.labels_before) == {"from": "server"} for e in run.executed[1:])


async def test_falling_behind_skips_the_rest_and_never_writes_more() -> None:
    clock = FakeClock()
    mutations = plan()
    writes: list[int] = []

    async def write(m: Mutation) -> None:
        writes.append(m.id)
        clock.now += 2.0  # each write takes far longer than the period

    run = await run_churn(mutations, write, duration=1.0, slack=3.0, clock=clock, sleep=clock.sleep,
                          max_in_flight=1)  # fmt: skip
    assert 0 < len(run.executed) < len(mutations)
    assert len(run.executed) + len(run.skipped) == len(mutations)
    assert sorted(writes) == [e.id for e in run.executed]


async def test_one_object_is_written_in_order_others_overlap() -> None:
    mutations = plan(objects=2, rate=200, duration=0.1)
    active: dict[str, int] = {}
    overlap_across = 0
    order: list[int] = []

    async def write(m: Mutation) -> None:
        nonlocal overlap_across
        assert active.get(m.name, 0) == 0, "two writes to one object at once"
        active[m.name] = 1
        overlap_across = max(overlap_across, sum(active.values()))
        order.append(m.id)
        await asyncio.sleep(0.02)
        active[m.name] = 0

    run = await run_churn(mutations, write, max_in_flight=4)
    assert all(e.ok for e in run.executed)
    for name in {m.name for m in mutations}:
        ids = [i for i in order if mutations[i].name == name]
        assert ids == sorted(ids)
    assert overlap_across == 2


async def test_cancel_stops_the_run_and_records_writes_in_flight() -> None:
    mutations = plan(rate=100, duration=1)
    recorded: list[ExecutedMutation] = []
    started = asyncio.Event()

    async def write(m: Mutation) -> None:
        started.set()
        await asyncio.sleep(10)

    task = asyncio.create_task(run_churn(mutations, write, on_executed=recorded.append))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert recorded and all(e.error == "cancelled" and not e.ok for e in recorded)
    assert len(recorded) < len(mutations)
