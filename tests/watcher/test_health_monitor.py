"""The heartbeat monitor against a fake SKR fleet: writes, echoes, refusals, recovery."""

from __future__ import annotations

import argparse
import asyncio
import io
import json
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from prometheus_client import generate_latest

from watcher.health import cli as health_cli
from watcher.health.heartbeat import next_delay, phase
from watcher.health.monitor import HealthMonitor, HeartbeatNotAdmitted, HeartbeatWriteError
from watcher.health.state import Policy, Reason, RuntimeHealth, State
from watcher.listener.verify import Rejection

POLICY = Policy(interval=0.3, timeout=0.1)


@dataclass
class FakeFleet:
    """What each runtime's SKR does with a heartbeat: ``echo`` (after 10 ms), ``drop``
    (written, nothing comes back), ``fail`` (the write fails) or ``refuse``."""

    monitor: HealthMonitor | None = None
    behaviour: dict[str, str] = field(default_factory=dict)
    writes: list[tuple[str, int]] = field(default_factory=list)

    async def write(self, runtime_id: str, seq: int) -> None:
        self.writes.append((runtime_id, seq))
        mode = self.behaviour.get(runtime_id, "echo")
        monitor = self.monitor
        assert monitor is not None
        loop = asyncio.get_running_loop()
        if mode == "fail":
            raise HeartbeatWriteError("unreachable")
        if mode == "echo":
            loop.call_later(0.01, monitor.echo, runtime_id)
        elif mode == "refuse":
            rejection = Rejection(runtime_id, 403, "san-mismatch", "no SAN matches")
            loop.call_later(0.01, monitor.refused, rejection)


def monitored(fleet: FakeFleet, **kwargs: object) -> HealthMonitor:
    monitor = HealthMonitor(fleet.write, policy=POLICY, **kwargs)  # type: ignore[arg-type]
    fleet.monitor = monitor
    return monitor


async def until(predicate: Callable[[], bool], within: float = 5.0) -> None:
    async with asyncio.timeout(within):
        while not predicate():
            await asyncio.sleep(0.01)


async def test_each_failure_is_told_apart_and_a_working_runtime_stays_healthy() -> None:
    fleet = FakeFleet(behaviour={"drop": "drop", "fail": "fail", "refuse": "refuse"})
    async with monitored(fleet) as monitor:
        for rid in ("ok", "drop", "fail", "refuse"):
            monitor.add(rid)

        def state(rid: str) -> State | None:
            health = monitor.health(rid)
            return health.state if health else None

        await until(lambda: all(state(r) is State.BROKEN for r in ("drop", "fail", "refuse")))
        reasons = {rid: monitor.health(rid).reason for rid in ("drop", "fail", "refuse")}  # type: ignore[union-attr]
        assert reasons == {
            "drop": Reason.NO_EVENT,
            "fail": Reason.SKR_WRITE_FAILED,
            "refuse": Reason.EVENT_REFUSED,
        }
        assert monitor.health("refuse").detail == "san-mismatch"  # type: ignore[union-attr]
        assert monitor.health("fail").detail == "unreachable"  # type: ignore[union-attr]
        assert state("ok") is State.HEALTHY
        ok = monitor.status("ok")
        assert ok is not None and ok.health.round_trip is not None
        assert 0.005 < ok.health.round_trip < POLICY.timeout
        metrics = monitor.metrics
        assert metrics.value("watcher_health_runtimes", {"state": "Broken"}) == 3
        labels = {"runtime_id": "fail", "state": "Broken", "reason": "SkrWriteFailed"}
        assert metrics.value("watcher_health_state", labels) == 1
        assert metrics.value("watcher_health_refusals_total", {"category": "san-mismatch"}) >= 2
        assert metrics.value("watcher_health_round_trip_seconds_count") >= 1


async def test_recovery_is_reported_once_and_ill_runtimes_are_probed_sooner() -> None:
    fleet = FakeFleet(behaviour={"r": "drop"})
    transitions: list[tuple[str, RuntimeHealth, RuntimeHealth]] = []
    async with monitored(fleet, jitter=0.0) as monitor:
        monitor.on_transition.append(lambda rid, b, a: transitions.append((rid, b, a)))
        monitor.add("r")
        await until(lambda: monitor.health("r").state is State.BROKEN)  # type: ignore[union-attr]
        broken_writes = len(fleet.writes)
        fleet.behaviour["r"] = "echo"
        loop = asyncio.get_running_loop()
        fixed = loop.time()
        await until(lambda: monitor.health("r").state is State.HEALTHY)  # type: ignore[union-attr]
        # probed every interval / 2 while Broken: back within one interval of the fix
        assert loop.time() - fixed <= POLICY.interval + 0.2  # generous: a busy CI machine
        await asyncio.sleep(POLICY.interval * 2)
        assert len(fleet.writes) > broken_writes
    recovered = [a for _, _, a in transitions if a.recovered]
    assert len(recovered) == 1
    states = [a.state for _, _, a in transitions]
    assert states[:2] == [State.BROKEN, State.HEALTHY]  # one miss alone did not flap


async def test_echoes_without_a_heartbeat_out_are_ignored_and_removed_runtimes_leave() -> None:
    fleet = FakeFleet()
    async with monitored(fleet) as monitor:
        assert not monitor.echo("stranger")
        monitor.add("r")
        assert not monitor.echo("r")  # nothing sent yet
        assert monitor.unmatched_echoes == 2
        await until(lambda: monitor.health("r").state is State.HEALTHY)  # type: ignore[union-attr]
        monitor.remove("r")
        assert "r" not in monitor and monitor.snapshot() == []
        sent = len(fleet.writes)
        await asyncio.sleep(POLICY.interval * 1.5)
        assert len(fleet.writes) == sent
        assert monitor.metrics.value("watcher_health_runtimes", {"state": "Healthy"}) == 0


async def test_a_hanging_write_fails_by_the_write_timeout() -> None:
    async def hang(runtime_id: str, seq: int) -> None:
        await asyncio.sleep(60)

    policy = Policy(interval=0.3, timeout=0.1, write_timeout=0.2)
    async with HealthMonitor(hang, policy=policy) as monitor:
        monitor.add("r")

        def failed() -> bool:
            health = monitor.health("r")
            return health is not None and health.reason is Reason.SKR_WRITE_FAILED

        await until(failed)
        health = monitor.health("r")
        assert health is not None
        assert (health.state, health.detail) == (State.DEGRADED, "timeout")  # at once
        await until(lambda: monitor.health("r").state is State.BROKEN)  # type: ignore[union-attr]
        assert monitor.health("r").reason is Reason.SKR_WRITE_FAILED  # type: ignore[union-attr]


async def test_a_write_the_admission_chain_holds_is_written_not_failed() -> None:
    """A webhook that delivers inside the admission call (upstream's) holds the heartbeat
    write while it retries a broken KCP path, then the API server admits it: NoEvent, with
    the write's time, not SkrWriteFailed. The one that answers late but delivers is
    Healthy; a webhook call that failed (failurePolicy Fail) counts as written too."""
    delivered = {"held-echo"}
    monitor: HealthMonitor | None = None

    async def write(runtime_id: str, seq: int) -> None:
        assert monitor is not None
        if runtime_id == "not-admitted":
            raise HeartbeatNotAdmitted("webhook w.example.com timed out")
        await asyncio.sleep(0.25)  # past the 0.1 s echo deadline, within write_timeout
        if runtime_id in delivered:
            monitor.echo(runtime_id)

    monitor = HealthMonitor(write, policy=POLICY)
    async with monitor:
        for rid in ("held", "held-echo", "not-admitted"):
            monitor.add(rid)

        def health(rid: str) -> RuntimeHealth:
            h = monitor.health(rid) if monitor is not None else None
            assert h is not None
            return h

        await until(lambda: health("held").state is State.BROKEN and bool(health("held").detail))
        await until(lambda: health("not-admitted").state is State.BROKEN)
        assert health("held").reason is Reason.NO_EVENT
        assert health("held").detail.startswith("write took 0.")
        assert (health("not-admitted").reason, health("not-admitted").detail) == (
            Reason.NO_EVENT,
            "webhook w.example.com timed out",
        )
        await until(lambda: health("held-echo").last_received is not None)
        assert health("held-echo").state is State.HEALTHY  # late echoes: it delivers
        assert monitor.metrics.value("watcher_health_heartbeat_write_failures_total") == 0
        labels = {"runtime_id": "held", "state": "Broken", "reason": "NoEvent"}
        assert (
            monitor.metrics.value(
                "watcher_health_state", {**labels, "detail": health("held").detail}
            )
            == 1
        )


def test_heartbeats_spread_over_the_interval_and_jitter_only_shortens() -> None:
    phases = sorted(phase(f"runtime-{n}", 60.0) for n in range(1000))
    assert phases[0] >= 0 and phases[-1] < 60
    buckets = [sum(1 for p in phases if k * 6 <= p < (k + 1) * 6) for k in range(10)]
    assert min(buckets) > 60  # about 100 in each sixth of a minute
    assert phase("runtime-a", 60.0) == phase("runtime-a", 60.0)
    assert next_delay(60.0, 0.1, 0.0) == 60.0
    assert 54.0 <= next_delay(60.0, 0.1, 0.999) < 60.0
    with pytest.raises(ValueError, match="jitter"):
        HealthMonitor(FakeFleet().write, jitter=1.0)


async def test_the_health_command_prints_the_fleet_worst_first_and_gates_on_it() -> None:
    fleet = FakeFleet(behaviour={"runtime-bad": "fail"})
    async with monitored(fleet) as monitor:
        monitor.add("runtime-good")
        monitor.add("runtime-bad")
        await until(lambda: monitor.health("runtime-bad").state is State.BROKEN)  # type: ignore[union-attr]
        await until(lambda: monitor.health("runtime-good").state is State.HEALTHY)  # type: ignore[union-attr]

        async def metrics(request: web.Request) -> web.Response:
            return web.Response(body=generate_latest(monitor.metrics.registry))

        app = web.Application()
        app.router.add_get("/metrics", metrics)
        async with TestServer(app, host="127.0.0.1") as server:
            url = str(server.make_url("/metrics"))

            def command(*extra: str) -> tuple[int, str, str]:
                out, err = io.StringIO(), io.StringIO()
                code = main_with(["health", "--metrics", url, *extra], out, err)
                return code, out.getvalue(), err.getvalue()

            code, out, _ = await asyncio.to_thread(command)
            assert code == 1  # a Broken runtime fails the default gate
            assert out.index("runtime-bad") < out.index("runtime-good")
            assert "SkrWriteFailed" in out and "unreachable" in out
            code, out, _ = await asyncio.to_thread(command, "--fail-on", "never", "--json")
            assert code == 0
            rows = json.loads(out)
            assert [r["state"] for r in rows] == ["Broken", "Healthy"]
            assert rows[1]["roundTripSeconds"] > 0
            err = io.StringIO()
            argv = ["health", "--metrics", str(server.make_url("/nothing-here"))]
            code = await asyncio.to_thread(main_with, argv, io.StringIO(), err)
            assert code == 2
            assert "cannot read metrics" in err.getvalue()


def main_with(argv: list[str], out: io.StringIO, err: io.StringIO) -> int:
    """``python -m watcher`` with its output captured."""
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command", required=True)
    health_cli.add_parser(sub)
    return health_cli.run(parser.parse_args(argv), out, err)
