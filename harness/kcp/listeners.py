"""What the environment asks of a manager's listener, whichever implementation serves it.

Ours runs in the harness process (:class:`~harness.kcp.lifecycle_manager.events.ListenerHost`
around :class:`watcher.listener.Listener`); upstream's Go listener runs as a process of its
own (:class:`~harness.kcp.listener_process.ListenerProcess`). Both give every accepted
event to the same callback, keep their port across ``stop``/``start`` (so the gateway's
route stays valid) and answer metric reads summed over their incarnations.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, Protocol

Implementation = Literal["ours", "upstream"]
"""Which listener serves a component: ``watcher.listener`` or upstream's Go package."""


class ManagerListener(Protocol):
    """A component's listener behind the gateway: restartable on the same port."""

    @property
    def component(self) -> str: ...

    @property
    def implementation(self) -> Implementation: ...

    @property
    def running(self) -> bool: ...

    @property
    def port(self) -> int: ...

    @property
    def url(self) -> str:
        """``https://`` (ours behind the mesh) or ``http://`` base URL of its own port."""
        ...

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def restart(self) -> None: ...

    async def read_metric(self, name: str, labels: Mapping[str, str] | None = None) -> float:
        """One metric now, summed over incarnations (0 when never observed)."""
        ...

    def samples(self, name: str) -> dict[tuple[tuple[str, str], ...], float]:
        """Every labelled series named ``name`` (labels sorted), summed over incarnations."""
        ...
