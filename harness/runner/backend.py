"""Whether the backends of runnable plans have their tools on this machine.

The one check about a scenario's backend that is not part of its plan
(:mod:`harness.runner.plan`), because it asks the machine: kind needs its CLI and a
Docker engine. ``watcher-harness run`` exits 3 with what is missing before anything
starts; the pytest plugin skips the scenario with it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from harness.clusters.selection import BackendChoice
from harness.runner.plan import ScenarioPlan

ToolCheck = Callable[[BackendChoice], Awaitable[str | None]]
"""What is missing for a backend on this machine, as one line (None: nothing)."""


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


async def missing_tools(
    plans: Sequence[ScenarioPlan], tools: ToolCheck = backend_tools
) -> list[str | None]:
    """Per plan, what its backend lacks here (None: nothing, or the plan is not runnable);
    each backend is asked once."""
    seen: dict[str, str | None] = {}
    out: list[str | None] = []
    for plan in plans:
        choice = plan.backend
        if choice is not None and choice.name not in seen:
            seen[choice.name] = await tools(choice)
        out.append(seen[choice.name] if choice is not None else None)
    return out
