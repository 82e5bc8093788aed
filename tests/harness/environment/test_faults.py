"""Fault targets and actions: what parses, and the errors a scenario author sees."""

from __future__ import annotations

import pytest

from harness.faults import ACTIONS, Fault, FaultError, parse_fault

NAMES = {
    "webhook": frozenset({"skr-a", "skr-b"}),
    "listener": frozenset({"lifecycle-manager"}),
    "apiserver": frozenset({"kcp", "skr-a"}),
}


@pytest.mark.parametrize(
    ("target", "action", "expected"),
    [
        ("gateway", "kill", Fault("gateway", "", "kill")),
        ("webhook/skr-a", "restart", Fault("webhook", "skr-a", "restart")),
        ("listener/lifecycle-manager", "stop", Fault("listener", "lifecycle-manager", "stop")),
        ("apiserver/kcp", "start", Fault("apiserver", "kcp", "start")),
        ("kcp", "abort", Fault("kcp", "", "abort")),
        ("certificates", "rotate-ca", Fault("certificates", "", "rotate-ca")),
    ],
)
def test_known_targets_parse(target: str, action: str, expected: Fault) -> None:
    fault = parse_fault(target, action, NAMES)
    assert fault == expected
    assert fault.target == target


@pytest.mark.parametrize(
    ("target", "action", "message"),
    [
        ("router", "stop", "unknown fault target 'router'"),
        ("webhook", "stop", "needs a name: webhook/<name>"),
        ("gateway/x", "stop", "takes no name"),
        ("listener/lifecycle-manager", "kill", "unknown action 'kill'"),
        ("webhook/skr-z", "stop", "no webhook named 'skr-z' in this environment (have: skr-a"),
        ("kcp", "stop", "use one of: delay, abort, clear"),
    ],
)
def test_mistakes_are_named(target: str, action: str, message: str) -> None:
    with pytest.raises(FaultError, match=message.replace("(", r"\(").replace("*", r"\*")):
        parse_fault(target, action, NAMES)


def test_every_kind_has_actions_and_errors_are_value_errors() -> None:
    assert all(ACTIONS.values())
    with pytest.raises(ValueError):
        parse_fault("nowhere", "stop")
