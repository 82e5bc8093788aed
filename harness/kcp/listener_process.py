"""A manager's listener as a process of its own: upstream's Go listener, or any command.

``tools/upstream-listener`` wraps ``github.com/kyma-project/runtime-watcher/listener``
(``event.NewSKREventListener``, plain HTTP on ``/v2/<component>/event``, runtime id from
the XFCC certificate's CN, no verify function) in a program that prints every event it
hands over as one JSON line on stdout (:mod:`watcher.listener.event_lines`) and serves
upstream's ``watcher_listener_*`` metrics on a second loopback port; ``watcher-listener``
prints the same lines (:func:`ours_command`: the soak measures ours alone this way, over
the mesh's mTLS when there is one). :class:`ListenerProcess` owns successive incarnations of such a
command on the same ports (so the gateway's route stays valid across a ``stop``/``start``
fault), reads the event lines as they come and gives each to ``callback`` — the same
callback and the same :class:`~watcher.listener.ListenerEvent` as an in-process
listener's, so its events count in every expectation like ours.

What upstream's does not do, and so the environment does not ask of it: SAN pinning (no
verify function since Dec 2025) and TLS (Istio's sidecar terminates the mesh's mTLS in
front of it; the gateway reaches it over plain HTTP, ``EnvoyGateway.reach_plaintext``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path

import aiohttp

from harness.aio import spawn, stop_tasks
from harness.clusters import ports, probes
from harness.clusters.incarnations import CountingIncarnations
from harness.clusters.process import OwnedProcess, Probe
from harness.errors import HarnessError
from harness.expect.prom import Sample
from harness.kcp.listeners import Implementation
from watcher.listener import ListenerEvent
from watcher.listener.event_lines import parse_event_line

logger = logging.getLogger("harness.kcp.listener_process")

EventCallback = Callable[[ListenerEvent], Awaitable[None]]
ListenerCommand = Callable[[str, int, int], list[str]]
"""(component, port, metrics port) → the argv of one incarnation (loopback only)."""


class ListenerProcessError(HarnessError, RuntimeError):
    """The process is not running (or already is) when the call needs the other state."""


def upstream_command(binary: Path) -> ListenerCommand:
    """Upstream's Go listener, built from ``tools/upstream-listener``."""

    def argv(component: str, port: int, metrics_port: int) -> list[str]:
        return [
            str(binary),
            *("--component", component, "--host", ports.LOOPBACK),
            *("--port", str(port), "--metrics-port", str(metrics_port)),
        ]

    return argv


@dataclass(frozen=True)
class ListenerTls:
    """Serving certificate and key, and the CA of the gateway's client certificates."""

    cert: Path
    key: Path
    gateway_ca: Path


def ours_command(tls: ListenerTls | None = None) -> ListenerCommand:
    """Our ``watcher-listener`` (next to this interpreter, else from ``PATH``): with ``tls``
    it serves mTLS and believes XFCC only from a gateway certificate of that CA (the CLI's
    default gateway name ``kcp-gateway``); without, plain HTTP believing any XFCC, as the
    environment's in-process listeners do when the mesh is off. ``/metrics`` is served on
    the event port."""
    search = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    executable = shutil.which("watcher-listener", path=search)
    if executable is None:
        raise ListenerProcessError("watcher-listener not found; install the project")

    def argv(component: str, port: int, metrics_port: int) -> list[str]:
        words = [executable, "--component", component, "--host", ports.LOOPBACK]
        words += ["--port", str(port)]
        if tls is None:
            return [*words, "--insecure-trust-any-xfcc"]
        words += ["--tls-cert", str(tls.cert), "--tls-key", str(tls.key)]
        return [*words, "--gateway-ca", str(tls.gateway_ca)]

    return argv


def without_listener_settings(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` without ``WATCHER_LISTENER_*``: settings that would change our listener's
    mode behind the flags :func:`ours_command` gives it."""
    return {k: v for k, v in env.items() if not k.startswith("WATCHER_LISTENER_")}


def template_command(words: Sequence[str]) -> ListenerCommand:
    """Any listener: ``words`` with ``{component}``, ``{host}``, ``{port}`` and
    ``{metrics_port}`` filled in (e.g. ``watcher-listener --component {component}
    --port {port} --insecure-trust-any-xfcc``)."""

    def argv(component: str, port: int, metrics_port: int) -> list[str]:
        values = {
            "component": component,
            "host": ports.LOOPBACK,
            "port": str(port),
            "metrics_port": str(metrics_port),
        }
        return [word.format(**values) for word in words]

    return argv


@dataclass(eq=False)
class ListenerProcess(CountingIncarnations):
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
    consumed: int = field(default=0, init=False)
    callback_errors: int = field(default=0, init=False)
    _reader: asyncio.Task[None] | None = field(default=None, init=False)
    _scraped: list[list[Sample]] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        self.name = f"{self.implementation}-listener-{self.component}"

    # -- facts ------------------------------------------------------------------------

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

    # -- lifecycle --------------------------------------------------------------------

    def _fresh_ports(self) -> tuple[int, int]:
        return ports.free_port(), ports.free_port()

    async def _run(self) -> None:
        assert self._session is not None
        argv = self.command(self.component, *self._ports)
        process = self._incarnation(argv, self._probe(self._session), self.env, stdout_pipe=True)
        await process.launch()
        # Read from the first byte on: the pipe must never fill while we wait for ready.
        self._reader = spawn(self._read(process), f"listener-{self.component}-events")
        try:
            await process.wait_ready()
        except BaseException:
            await self._stop(process)
            raise
        self._process = process
        self._scraped.append([])

    def _probe(self, session: aiohttp.ClientSession) -> Probe:
        if self.serves_tls:
            return probes.tcp_probe(ports.LOOPBACK, self.port)
        # A GET on the event path is answered 405 (upstream's and ours): it is served.
        return probes.http_probe(session, self.event_url, lambda status, _: status == 405)

    async def _read(self, process: OwnedProcess) -> None:
        """Every event line to the callback, in order, until the process closes stdout."""
        stream = process.stdout
        while line := await stream.readline():
            event = parse_event_line(line)
            if event is None:
                logger.warning("%s: not an event line: %r", self.component, line[:200])
                continue
            self.consumed += 1
            try:
                await self.callback(event)
            except Exception:
                self.callback_errors += 1
                logger.exception("%s: handling event %s failed", self.component, event)

    async def stop(self) -> None:
        """SIGTERM (upstream shuts its server down), then the events it printed are handed
        over; metrics are scraped first so the counters survive the incarnation."""
        if self._process is None:
            return
        await self._scrape()
        process, self._process = self._process, None
        await self._stop(process)

    async def _stop(self, process: OwnedProcess) -> None:
        reader, self._reader = self._reader, None
        try:
            await process.stop()
        finally:
            if reader is not None:
                try:
                    async with asyncio.timeout(self.stop_timeout):
                        await asyncio.wait({reader})
                except TimeoutError:
                    logger.warning("%s: event lines not read to the end", self.component)
                await stop_tasks([reader])

    # -- metrics ----------------------------------------------------------------------

    def _metrics_url(self) -> str | None:
        if self.serves_tls:
            return None
        port = self._port(1) if self.metrics_on_own_port else self.port
        return f"http://{ports.LOOPBACK}:{port}/metrics"

    def samples(self, name: str) -> dict[tuple[tuple[str, str], ...], float]:
        """Every series named ``name`` as of the last scrape, summed over incarnations."""
        out: dict[tuple[tuple[str, str], ...], float] = {}
        for samples in self._scraped:
            for sample in samples:
                if sample.name == name:
                    key = tuple(sorted(sample.labels.items()))
                    out[key] = out.get(key, 0.0) + sample.value
        return out

    def __repr__(self) -> str:
        port = self._ports[0] if self._ports else 0
        return f"ListenerProcess({self.component!r}, port={port}, running={self.running})"
