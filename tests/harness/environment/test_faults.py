"""Faults: what parses, the errors a scenario author sees, and the executor's arms."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from harness.environment.inject import inject, named
from harness.faults import (
    BreakLeaves,
    FaultError,
    KcpFault,
    Lifecycle,
    Part,
    PartFault,
    RotateLeaves,
    describe_injection,
    kcp_injection,
)
from watcher.render.envoy import FaultInjection


@pytest.mark.parametrize(
    ("target", "action", "expected"),
    [
        ("gateway", "kill", PartFault(Part.GATEWAY, "", Lifecycle.KILL)),
        ("webhook/skr-a", "restart", PartFault(Part.WEBHOOK, "skr-a", Lifecycle.RESTART)),
        (
            "listener/lifecycle-manager",
            "stop",
            PartFault(Part.LISTENER, "lifecycle-manager", Lifecycle.STOP),
        ),
        ("apiserver/kcp", "start", PartFault(Part.APISERVER, "kcp", Lifecycle.START)),
    ],
)
def test_known_targets_parse(target: str, action: str, expected: PartFault) -> None:
    fault = PartFault.parse(target, action)
    assert fault == expected
    assert fault.target == target


@pytest.mark.parametrize(
    ("target", "action", "message"),
    [
        ("router", "stop", "unknown fault target 'router'"),
        ("webhook", "stop", "must be webhook/<name>"),
        ("gateway/x", "stop", "must be gateway"),
        ("listener/lifecycle-manager", "kill", "unknown action 'kill'.*stop, start, restart"),
        ("kcp", "stop", "unknown fault target 'kcp'"),
    ],
)
def test_mistakes_are_named(target: str, action: str, message: str) -> None:
    with pytest.raises(FaultError, match=message):
        PartFault.parse(target, action)
    with pytest.raises(ValueError):  # a FaultError is a ValueError: pydantic locates it
        PartFault.parse(target, action)


def test_an_unknown_part_name_lists_what_runs() -> None:
    fault = PartFault(Part.WEBHOOK, "skr-z", Lifecycle.STOP)
    with pytest.raises(
        FaultError, match=r"no webhook named 'skr-z' in this environment \(have: a, b\)"
    ):
        named({"b": 2, "a": 1}, fault)
    assert named({"skr-z": 3}, fault) == 3


def test_kcp_injection_in_the_timeline() -> None:
    assert describe_injection(None) == "no fault"
    assert describe_injection(kcp_injection(delay=0.1, abort_percent=50)) == (
        "delay 0.1 s, abort 50% with 503"
    )
    assert kcp_injection(abort_percent=100).delay_percent == 0.0  # no delay asked: none


@dataclass
class FakeGateway:
    set_to: list[FaultInjection | None] = field(default_factory=list)

    async def set_fault(self, injection: FaultInjection | None) -> None:
        self.set_to.append(injection)


@dataclass
class FakePorts:
    gateway: FakeGateway = field(default_factory=FakeGateway)
    certificates: None = None
    parts: list[PartFault] = field(default_factory=list)

    async def lifecycle(self, fault: PartFault) -> str:
        self.parts.append(fault)
        return "done"


async def test_each_variant_reaches_its_port() -> None:
    ports = FakePorts()
    part = PartFault(Part.APISERVER, "kcp", Lifecycle.RESTART)
    assert await inject(ports, part) == "done"  # type: ignore[arg-type]
    assert ports.parts == [part]
    injection = kcp_injection(delay=0.5)
    assert await inject(ports, KcpFault(injection)) == "delay 0.5 s, abort 0% with 503"  # type: ignore[arg-type]
    assert await inject(ports, KcpFault(None)) == "no fault"  # type: ignore[arg-type]
    assert ports.gateway.set_to == [injection, None]
    for fault in (RotateLeaves(), BreakLeaves(("skr-a",), "expired")):
        with pytest.raises(FaultError, match="need the harness's own KLM"):
            await inject(ports, fault)  # type: ignore[arg-type]
