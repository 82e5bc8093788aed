"""A manager's listener as a process of its own: upstream's Go listener, or any command.

``tools/upstream-listener`` wraps upstream's ``event.NewSKREventListener`` (plain HTTP on
``/v2/<component>/event``, runtime id from the XFCC certificate's CN) in a program that
prints every event as one JSON line (:mod:`watcher.listener.event_lines`) and serves
``watcher_listener_*`` metrics on a second port; ``watcher-listener`` prints the same lines
(:func:`ours_command`). :class:`ListenerProcess` keeps the ports across restarts and gives
each event to the same callback an in-process listener's events go to, so they count in
every expectation alike. Upstream's does no SAN pinning and no TLS (Istio's sidecar
terminates the mesh's mTLS; the gateway reaches it with ``EnvoyGateway.reach_plaintext``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import sys
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path

import aiohttp

from harness.aio import spawn
from harness.clusters import ports, probes
from harness.clusters.incarnations import CountingIncarnations
from harness.clusters.process import OwnedProcess, Probe
from harness.errors import HarnessError
from harness.expect.prom import Sample
from harness.kcp.listeners import (
    EventCallback,
    EventCounts,
    Implementation,
    Series,
    drain,
    summed_series,
)
from watcher.listener import ListenerEvent
from watcher.listener.event_lines import parse_event_line

logger = logging.getLogger("harness.kcp.listener_process")

ListenerCommand = Callable[[str, int, int], list[str]]
"""(component, port, metrics port) → the argv of one incarnation (loopback only)."""


class ListenerProcessError(HarnessError, RuntimeError):
    """The process is not running (or already is) when the call needs the other state."""


def _command(program: str, *tail: str, metrics_port: bool = False) -> ListenerCommand:
    def argv(component: str, port: int, metrics: int) -> list[str]:
        words = [program, "--component", component, "--host", ports.LOOPBACK, "--port", str(port)]
        return [*words, *(("--metrics-port", str(metrics)) if metrics_port else ()), *tail]

    return argv


def upstream_command(binary: Path) -> ListenerCommand:
    """Upstream's Go listener, built from ``tools/upstream-listener``."""
    return _command(str(binary), metrics_port=True)


@dataclass(frozen=True)
class ListenerTls:
    """Serving certificate and key, and the CA of the gateway's client certificates."""

    cert: Path
    key: Path
    gateway_ca: Path


def ours_command(tls: ListenerTls | None = None) -> ListenerCommand:
    """Our ``watcher-listener``: with ``tls`` mTLS believing XFCC only from a gateway
    certificate of that CA; without, plain HTTP believing any XFCC (as in-process
    listeners when the mesh is off). ``/metrics`` is on the event port."""
    search = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    executable = shutil.which("watcher-listener", path=search)
    if executable is None:
        raise ListenerProcessError("watcher-listener not found; install the project")
    if tls is None:
        return _command(executable, "--insecure-trust-any-xfcc")
    files = ("--tls-cert", str(tls.cert), "--tls-key", str(tls.key))
    return _command(executable, *files, "--gateway-ca", str(tls.gateway_ca))


def without_listener_settings(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` without ``WATCHER_LISTENER_*``: settings that would change our listener's
    mode behind the flags :func:`ours_command` gives it."""
    return {k: v for k, v in env.items() if not k.startswith("WATCHER_LISTENER_")}


def template_command(words: Sequence[str]) -> ListenerCommand:
    """Any listener: ``words`` with ``{component}``, ``{host}``, ``{port}`` and
    ``{metrics_port}`` filled in."""

    def argv(component: str, port: int, metrics_port: int) -> list[str]:
        values = dict(
            component=component, host=ports.LOOPBACK, port=port, metrics_port=metrics_port
        )
        return [word.format(**values) for word in words]

    return argv


@dataclass(eq=False)
class ListenerProcess(EventCounts, CountingIncarnations):
    """``async with ListenerProcess(component, callback, command=..., log_path=...) as l:``;
    ports: events, metrics. Ready once its event path answers."""

    error = ListenerProcessError

    component: str
    callback: EventCallback
    _: KW_ONLY
    command: ListenerCommand
    log_path: Path
    implementation: Implementation = "upstream"
    metrics_on_own_port: bool = True
    """False: ``/metrics`` is served on the event port (ours), not ``{metrics_port}``."""
    serves_tls: bool = False
    """The command serves mTLS (ours behind the mesh), so it is ready once its port accepts
    connections (a GET needs the gateway's certificate) and its metrics are not read."""
    env: Mapping[str, str] | None = None
    """The command's environment (None: this process's)."""
    ready_timeout: float = 20.0
    stop_timeout: float = 10.0
    name: str = field(init=False)
    _reader: asyncio.Task[None] | None = field(default=None, init=False)
    _scraped: list[list[Sample]] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        self.name = f"{self.implementation}-listener-{self.component}"

    @property
    def port(self) -> int:
        return self._port(0)

    @property
    def url(self) -> str:
        scheme = "https" if self.serves_tls else "http"
        return f"{scheme}://{ports.LOOPBACK}:{self.port}"

    @property
    def event_url(self) -> str:
        return f"{self.url}/v2/{self.component}/event"

    def _fresh_ports(self) -> tuple[int, int]:
        return ports.free_port(), ports.free_port()

    async def _run(self) -> None:
        assert self._session is not None
        argv = self.command(self.component, *self._ports)
        process = self._incarnation(argv, self._probe(self._session), self.env, stdout_pipe=True)
        await process.launch()
        # Read from the first byte on: the pipe must never fill while we wait for ready.
        name = f"listener-{self.component}-events"
        self._reader = spawn(self.deliver(self._events(process), self.callback, name), name)
        try:
            await process.wait_ready()
        except BaseException:
            await self._end(OwnedProcess.stop)
            raise
        self._scraped.append([])

    def _probe(self, session: aiohttp.ClientSession) -> Probe:
        if self.serves_tls:
            return probes.tcp_probe(ports.LOOPBACK, self.port)
        # A GET on the event path is answered 405 (upstream's and ours): it is served.
        return probes.http_probe(session, self.event_url, lambda status, _: status == 405)

    async def _events(self, process: OwnedProcess) -> AsyncIterator[ListenerEvent]:
        """Every event line, until the process closes stdout."""
        while line := await process.stdout.readline():
            event = parse_event_line(line)
            if event is None:
                logger.warning("%s: not an event line: %r", self.component, line[:200])
            else:
                yield event

    async def _ended(self) -> None:
        """Hand over what the incarnation printed."""
        reader, self._reader = self._reader, None
        await drain(reader, self.stop_timeout, f"listener {self.component}")

    def _metrics_url(self) -> str | None:
        if self.serves_tls:
            return None
        port = self._port(1) if self.metrics_on_own_port else self.port
        return f"http://{ports.LOOPBACK}:{port}/metrics"

    def samples(self, name: str) -> Series:
        return summed_series(self._scraped, name)

    def __repr__(self) -> str:
        port = self._ports[0] if self._ports else 0
        return f"ListenerProcess({self.component!r}, port={port}, running={self.running})"
