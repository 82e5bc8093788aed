"""Several SKR installations rewired together whenever the Watchers on KCP change.

Upstream KLM renders ``skr-webhook`` into an SKR only on that SKR's next Kyma reconcile,
so a Watcher change reaches the fleet over minutes. :class:`SkrFleet` re-renders every SKR
at once (concurrently), so a KCP-side Watcher change can be wired straight to it as a
callback (``on_watchers_changed=fleet.apply_watchers``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Iterable, Iterator, Sequence

from harness.aio import Service, gather_all
from harness.skr.errors import SkrInstallError
from harness.skr.install import SkrInstallation
from watcher.render.watcher_cr import Watcher


class SkrFleet(Service):
    """Owns installations by cluster name; entering installs them all concurrently."""

    def __init__(self, installations: Iterable[SkrInstallation]) -> None:
        self._installations: dict[str, SkrInstallation] = {}
        for inst in installations:
            name = inst.cluster.name
            if name in self._installations:
                raise SkrInstallError(f"two installations for SKR cluster {name!r}")
            self._installations[name] = inst
        self._watchers: tuple[Watcher, ...] = ()

    def __getitem__(self, cluster_name: str) -> SkrInstallation:
        try:
            return self._installations[cluster_name]
        except KeyError:
            raise KeyError(
                f"no SKR installation {cluster_name!r}; have {sorted(self._installations)}"
            ) from None

    def __iter__(self) -> Iterator[SkrInstallation]:
        return iter(self._installations.values())

    def __len__(self) -> int:
        return len(self._installations)

    @property
    def watchers(self) -> tuple[Watcher, ...]:
        return self._watchers

    async def start(self) -> None:
        """Install all at once; those that made it are uninstalled together on the way out
        (also when another failed)."""
        entered: list[SkrInstallation] = []

        async def enter(inst: SkrInstallation) -> None:
            await inst.install()
            entered.append(inst)

        async def leave_all() -> None:
            await _all(inst.uninstall() for inst in reversed(entered))

        self.stack.push_async_callback(leave_all)
        await _all(enter(inst) for inst in self._installations.values())

    async def apply_watchers(self, watchers: Sequence[Watcher]) -> None:
        """Re-render ``skr-webhook`` in every SKR from all ``watchers``, concurrently."""
        self._watchers = tuple(watchers)
        await _all(inst.apply_watchers(watchers) for inst in self._installations.values())


async def _all(coros: Iterable[Awaitable[None]]) -> None:
    """Run all; wait for every one; raise the error (all errors if several)."""
    await gather_all(coros, _failed)


def _failed(errors: list[BaseException]) -> SkrInstallError:
    return SkrInstallError(f"{len(errors)} SKRs failed:\n" + "\n".join(f"- {e}" for e in errors))
