"""One program run again and again on the same ports: the owners fault scenarios stop,
kill and start (the API servers, the listener, KLM and webhook processes), each run an
:class:`~harness.clusters.process.OwnedProcess`."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path

import aiohttp

from harness.aio import Service
from harness.clusters.ports import exited_on_a_taken_port, start_on_free_ports
from harness.clusters.process import LOG_TAIL_LINES, OwnedProcess, Probe
from harness.errors import ProcessError
from harness.expect.prom import Sample, parse_samples, sample_sum

logger = logging.getLogger("harness.clusters.process")


class Incarnations(Service):
    """One program run again and again on the ports its first run picked, so that what
    points at them (a gateway route, a webhook configuration) stays valid while fault
    scenarios stop, kill and start it.

    A subclass says which ports a run needs (:meth:`_fresh_ports`; called again when
    another process took one before the bind), how one run starts (:meth:`_run`: ready
    when it returns, :attr:`_process` set) and what it collects once a run ended
    (:meth:`_ended`); :attr:`_session`, for probes and scrapes, lives as long as the object.
    """

    name: str
    log_path: Path
    ready_timeout: float
    stop_timeout: float
    error: type[Exception] = ProcessError
    """What the subclass raises when a call needs the other state."""
    session_timeout = aiohttp.ClientTimeout(total=5)
    _process: OwnedProcess | None = None
    _session: aiohttp.ClientSession | None = None
    _ports: tuple[int, ...] = ()

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.running

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None and self.running else None

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        return self._process.log_tail(lines) if self._process is not None else ""

    def _port(self, index: int) -> int:
        """Port ``index`` in the order :meth:`_fresh_ports` gives them."""
        if not self._ports:
            raise self.error(f"{self.name} has not been started yet")
        return self._ports[index]

    def _fresh_ports(self) -> tuple[int, ...]:
        raise NotImplementedError

    def _port_taken(self, exc: Exception) -> bool:
        """``exc`` says a run failed on a port another process took (fresh ones may do)."""
        return exited_on_a_taken_port(exc)

    def _incarnation(
        self,
        argv: Sequence[str],
        probe: Probe,
        env: Mapping[str, str] | None,
        *,
        stdout_pipe: bool = False,
        name: str | None = None,
        poll_interval: float = OwnedProcess.poll_interval,
    ) -> OwnedProcess:
        """The next run's process (now :attr:`_process`, whatever its start comes to),
        under this object's log, timeouts and (unless ``name``) name."""
        self._process = OwnedProcess(
            name or self.name,
            argv,
            log_path=self.log_path,
            probe=probe,
            ready_timeout=self.ready_timeout,
            stop_timeout=self.stop_timeout,
            env=env,
            stdout_pipe=stdout_pipe,
            poll_interval=poll_interval,
        )
        return self._process

    async def _run(self) -> None:
        raise NotImplementedError

    async def start(self) -> None:
        """Start the next run; the first picks the ports (fresh ones again while another
        process takes one before the bind)."""
        if self.running:
            raise self.error(f"{self.name} is already running (pid {self.pid})")
        if self._session is None:
            self.stack.callback(setattr, self, "_session", None)
            session = aiohttp.ClientSession(timeout=self.session_timeout)
            self._session = await self.stack.enter_async_context(session)
        if self._ports:
            await self._run()
            return

        async def on_fresh_ports() -> None:
            self._ports = self._fresh_ports()
            await self._run()

        try:
            await start_on_free_ports(on_fresh_ports, port_taken=self._port_taken)
        except BaseException:
            self._ports = ()
            raise

    async def stop(self) -> int | None:
        """SIGTERM (the program drains), SIGKILL after the stop timeout; the exit code."""
        return await self._end(OwnedProcess.stop)

    async def kill(self) -> int | None:
        """SIGKILL to the process group (a crash: no drain, no goodbye); the exit code."""
        return await self._end(OwnedProcess.kill)

    async def _end(self, how: Callable[[OwnedProcess], Awaitable[int | None]]) -> int | None:
        process, self._process = self._process, None
        try:
            return await how(process) if process is not None else None
        finally:
            await self._ended()

    async def _ended(self) -> None:
        """After a run ended (or none was running): collect what it left behind."""

    async def restart(self) -> None:
        await self.stop()
        await self.start()


class CountingIncarnations(Incarnations):
    """Incarnations whose Prometheus counters are read over all of them: the last scrape of
    each is kept (a new one starts its counters at 0), and a metric is their sum.

    A subclass appends ``[]`` to :attr:`_scraped` once an incarnation is ready and names
    its ``/metrics`` (:meth:`_metrics_url`); :meth:`stop` scrapes first.
    """

    _scraped: list[list[Sample]]
    """The last scrape of every incarnation, oldest first."""

    def _metrics_url(self) -> str | None:
        """Where the running incarnation serves ``/metrics`` (None: they are not read)."""
        raise NotImplementedError

    async def _scrape(self) -> None:
        """Refresh the running incarnation's samples (kept when scraping fails)."""
        if self._session is None or not self.running or not self._scraped:
            return
        url = self._metrics_url()
        if url is None:
            return
        try:
            async with self._session.get(url) as response:
                text = await response.text()
        except (aiohttp.ClientError, TimeoutError) as exc:
            logger.warning("%s: scraping %s failed: %s", self.name, url, exc)
            return
        if response.status == 200:
            self._scraped[-1] = parse_samples(text)

    async def stop(self) -> int | None:
        """Scrape (the counters survive the incarnation), then stop it."""
        await self._scrape()
        return await super().stop()

    async def read_metric(self, name: str, labels: Mapping[str, str] | None = None) -> float:
        """A metric now: the series whose labels include ``labels``, summed, over every
        incarnation (0 when absent)."""
        await self._scrape()
        wanted = dict(labels or {})
        return sum(sample_sum(samples, name, wanted) for samples in self._scraped)
