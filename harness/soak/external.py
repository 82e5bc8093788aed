"""A manager's listener as its own ``watcher-listener`` process behind the gateway.

The environment's listeners run inside the harness process, where their memory cannot be
told apart from the harness's own records. The soak routes a second Watcher to this
process instead, so a listener's RSS and descriptors are measured alone. The process
prints every accepted event as a JSON line on stdout, which goes to its log file (with
its JSON log lines on stderr); :meth:`ExternalListener.collect` reads the new event lines.

XFCC identity: the gateway forwards the SKR's client certificate in the header. With
:class:`ListenerTls` (the environment's gateway ↔ listener mesh) the process serves mTLS
and believes XFCC only from a gateway certificate of that CA (``--gateway-ca``; the CLI's
default trusted gateway name ``kcp-gateway``); without it, it serves plain HTTP on
loopback and is told to believe any XFCC (``WATCHER_LISTENER_INSECURE_TRUST_ANY_XFCC``),
as the environment's in-process listeners do when the mesh is off.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from harness.aio import Service
from harness.clusters import ports
from harness.clusters.process import NotReady, OwnedProcess, start_on_free_ports
from harness.errors import HarnessError
from harness.expect.match import ReceivedEvent
from watcher.listener import event_lines


@dataclass(frozen=True)
class ListenerTls:
    """Serving certificate and key, and the CA of the gateway's client certificates."""

    cert: Path
    key: Path
    gateway_ca: Path


class ExternalListenerError(HarnessError, RuntimeError):
    """``watcher-listener`` is missing or not running."""


def listener_executable() -> str:
    """``watcher-listener`` next to this interpreter (the venv), else from ``PATH``."""
    beside = Path(sys.executable).parent / "watcher-listener"
    if beside.is_file():
        return str(beside)
    found = shutil.which("watcher-listener")
    if found is None:
        raise ExternalListenerError("watcher-listener not found; install the project")
    return found


def parse_event_line(manager: str, line: str) -> ReceivedEvent | None:
    """The event an output line carries, or None for a log line or a broken line."""
    event = event_lines.parse_event_line(line)
    if event is None:
        return None
    watched = event.event.watched
    return ReceivedEvent(
        manager=manager,
        runtime_id=event.runtime_id,
        namespace=watched.namespace,
        name=watched.name,
        gvk=event.event.watched_gvk,
        received_at=event.received_at,
    )


class ExternalListener(Service):
    """``async with ExternalListener("config-manager", log_path) as ext:`` → ``ext.port``."""

    def __init__(
        self,
        component: str,
        log_path: Path,
        *,
        tls: ListenerTls | None = None,
        ready_timeout: float = 20.0,
    ) -> None:
        self.component = component
        self.tls = tls
        self.log_path = log_path
        self.events: list[ReceivedEvent] = []
        self._ready_timeout = ready_timeout
        self._process: OwnedProcess | None = None
        self._port = 0
        self._offset = 0
        self._partial = b""

    @property
    def port(self) -> int:
        if not self._port:
            raise ExternalListenerError(f"listener {self.component!r} was never started")
        return self._port

    @property
    def pid(self) -> int | None:
        process = self._process
        return process.pid if process is not None and process.running else None

    async def _probe(self) -> bool:
        try:
            _, writer = await asyncio.open_connection(ports.LOOPBACK, self._port)
        except OSError as exc:
            raise NotReady(f"connect {ports.LOOPBACK}:{self._port}: {exc}") from exc
        writer.close()
        await writer.wait_closed()
        return True

    async def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.log_path.unlink(missing_ok=True)  # events are read from offset 0

        async def on_fresh_port() -> None:
            self._port = ports.free_port()
            argv = [
                listener_executable(),
                "--component",
                self.component,
                "--host",
                ports.LOOPBACK,
                "--port",
                str(self._port),
            ]
            env = _base_env()
            if self.tls is None:
                env["WATCHER_LISTENER_INSECURE_TRUST_ANY_XFCC"] = "true"
            else:
                argv += ["--tls-cert", str(self.tls.cert), "--tls-key", str(self.tls.key)]
                argv += ["--gateway-ca", str(self.tls.gateway_ca)]
            process = OwnedProcess(
                f"watcher-listener-{self.component}",
                argv,
                log_path=self.log_path,
                probe=self._probe,
                ready_timeout=self._ready_timeout,
                env=env,
            )
            await process.__aenter__()
            self._process = process

        await start_on_free_ports(on_fresh_port)

    def collect(self) -> list[ReceivedEvent]:
        """Read the event lines written since the last call; returns every event so far."""
        try:
            with self.log_path.open("rb") as f:
                f.seek(self._offset)
                chunk = f.read()
        except FileNotFoundError:
            return self.events
        self._offset += len(chunk)
        data = self._partial + chunk
        lines = data.split(b"\n")
        self._partial = lines.pop()
        for raw in lines:
            event = parse_event_line(self.component, raw.decode("utf-8", "replace"))
            if event is not None:
                self.events.append(event)
        return self.events

    async def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None:
            await process.stop()
        self.collect()


def _base_env() -> dict[str, str]:
    """This process's environment without listener settings that would change its mode."""
    return {k: v for k, v in os.environ.items() if not k.startswith("WATCHER_LISTENER_")}
