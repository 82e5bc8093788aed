"""Which cluster backend a scenario runs on, checked before anything starts.

The one place that combines the three decisions every entry point needs (the command
line, the pytest plugin, the runner):

1. the choice — command line over ``WATCHER_HARNESS_*`` over the file
   (:func:`harness.clusters.selection.choose_backend`); a wrong choice (unknown backend,
   malformed context list) is :attr:`BackendProblem.INVALID`;
2. whether that backend can do what the scenario needs
   (:func:`harness.runner.spec.scenario_backend`): if not, :attr:`BackendProblem.UNSUPPORTED`
   — the scenario is skipped with the reason;
3. whether the backend's tools are here (kind: the ``kind`` CLI and a Docker engine):
   if not, :attr:`BackendProblem.UNAVAILABLE` — ``run`` exits 3, pytest skips.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from harness.clusters.selection import (
    BackendChoice,
    BackendOverride,
    BackendSelectionError,
    choose_backend,
)
from harness.runner.errors import BackendUnsupported
from harness.runner.spec import scenario_backend
from harness.scenario import Scenario

ToolCheck = Callable[[BackendChoice], Awaitable[str | None]]
"""What is missing for a backend on this machine, as one line (None: nothing)."""


class BackendProblem(StrEnum):
    INVALID = "invalid"
    """The choice itself is wrong (unknown backend name, malformed context list)."""
    UNSUPPORTED = "unsupported"
    """The backend cannot do what the scenario needs (e.g. stop a cluster's API server)."""
    UNAVAILABLE = "unavailable"
    """The backend's tools are missing here (kind without the CLI or a Docker engine)."""


@dataclass(frozen=True)
class BackendCheck:
    """The checked choice, or why the scenario cannot run (``problem`` and ``reason``).
    ``choice`` is None only when the choice itself is invalid."""

    choice: BackendChoice | None
    problem: BackendProblem | None = None
    reason: str | None = None

    @property
    def ok(self) -> bool:
        return self.problem is None

    @property
    def skip_reason(self) -> str | None:
        """Why the scenario is skipped: the backend cannot run it, or not on this machine."""
        skipped = (BackendProblem.UNSUPPORTED, BackendProblem.UNAVAILABLE)
        return self.reason if self.problem in skipped else None

    @property
    def error(self) -> str | None:
        """What is wrong with the backend selection (a scenario error, ``run`` exit 3)."""
        return self.reason if self.problem is BackendProblem.INVALID else None


async def backend_tools(choice: BackendChoice) -> str | None:
    """The default :data:`ToolCheck`: kind needs its CLI and a Docker engine; the other
    backends need nothing checked up front."""
    if choice.name != "kind":
        return None
    from harness.clusters.kind import KindUnavailable, SubprocessRunner, preflight

    try:
        await preflight(SubprocessRunner())
    except KindUnavailable as exc:
        return str(exc)
    return None


async def check_backend(
    scenario: Scenario,
    override: BackendOverride | None = None,
    *,
    env: Mapping[str, str] | None = None,
    tools: ToolCheck | None = backend_tools,
) -> BackendCheck:
    """Choose ``scenario``'s backend and check it (see the module doc). ``tools=None``
    leaves out the check of the machine's tools."""
    try:
        choice = choose_backend(scenario.backend.value, override=override, env=env)
    except BackendSelectionError as exc:
        return BackendCheck(None, BackendProblem.INVALID, str(exc))
    try:
        choice = scenario_backend(scenario, choice)
    except BackendUnsupported as exc:
        return BackendCheck(choice, BackendProblem.UNSUPPORTED, str(exc))
    if tools is not None:
        missing = await tools(choice)
        if missing is not None:
            return BackendCheck(choice, BackendProblem.UNAVAILABLE, missing)
    return BackendCheck(choice)


async def check_backends(
    scenarios: Iterable[Scenario],
    override: BackendOverride | None = None,
    *,
    env: Mapping[str, str] | None = None,
    tools: ToolCheck | None = backend_tools,
) -> list[BackendCheck]:
    """:func:`check_backend` for each scenario, checking each backend's tools once."""
    seen: dict[str, str | None] = {}

    async def once(choice: BackendChoice) -> str | None:
        if choice.name not in seen:
            seen[choice.name] = None if tools is None else await tools(choice)
        return seen[choice.name]

    return [
        await check_backend(s, override, env=env, tools=None if tools is None else once)
        for s in scenarios
    ]
