"""``check_backend``: the one place that chooses a scenario's backend and says why it
cannot run (invalid choice, unsupported by the backend, tools missing here)."""

from __future__ import annotations

import pytest

from harness.clusters.kind import INSTALL_KIND
from harness.clusters.selection import BackendChoice, BackendOverride
from harness.runner.backend import BackendProblem, check_backend, check_backends
from harness.scenario import loads_scenario

PLAIN = loads_scenario(
    "name: plain\nclusters: {skrs: [{name: skr-a}]}\nsteps: [{name: a, try: [{wait: 10ms}]}]\n"
)
STOPS = loads_scenario(
    "name: stops\nclusters: {skrs: [{name: skr-a}]}\n"
    "steps: [{name: a, try: [{fault: {target: apiserver/skr-a, action: stop}}]}]\n"
)
KUBECONFIG = BackendOverride(name="kubeconfig", kubeconfig="/k")


async def test_a_runnable_scenario_gets_its_checked_choice() -> None:
    check = await check_backend(PLAIN, KUBECONFIG, env={})
    assert check.ok and check.skip_reason is None and check.error is None
    assert check.choice is not None and check.choice.name == "kubeconfig"


async def test_an_invalid_choice_is_an_error() -> None:
    check = await check_backend(PLAIN, env={"WATCHER_HARNESS_BACKEND": "minikube"})
    assert check.problem is BackendProblem.INVALID and check.choice is None
    assert check.error is not None and "unknown cluster backend 'minikube'" in check.error
    assert check.skip_reason is None


async def test_what_the_backend_cannot_do_is_a_skip_with_the_reason() -> None:
    check = await check_backend(STOPS, KUBECONFIG, env={})
    assert check.problem is BackendProblem.UNSUPPORTED and check.error is None
    assert check.skip_reason is not None
    assert "does not own the clusters' API server processes" in check.skip_reason


async def test_missing_tools_are_a_skip_and_are_checked_once_per_backend(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked: list[str] = []

    async def no_kind(choice: BackendChoice) -> str | None:
        asked.append(choice.name)
        return INSTALL_KIND if choice.name == "kind" else None

    kind = BackendOverride(name="kind")
    checks = await check_backends([PLAIN, PLAIN, STOPS], kind, env={}, tools=no_kind)
    # what the backend cannot do comes first: kind owns no API server processes either
    assert [c.problem for c in checks] == [
        BackendProblem.UNAVAILABLE,
        BackendProblem.UNAVAILABLE,
        BackendProblem.UNSUPPORTED,
    ]
    assert [c.skip_reason for c in checks[:2]] == [INSTALL_KIND, INSTALL_KIND]
    assert asked == ["kind"]
    assert (await check_backend(PLAIN, env={}, tools=no_kind)).ok  # local needs nothing
    unchecked = await check_backend(PLAIN, kind, env={}, tools=None)
    assert unchecked.ok and unchecked.choice is not None and unchecked.choice.name == "kind"
