"""One object owns one external process: start, readiness, stop, and a record for reports.

etcd and kube-apiserver are real programs that outlive a crashed test unless something
owns them. :class:`OwnedProcess` is that owner, modelled on controller-runtime's envtest:

* the process starts in its own session (``start_new_session=True``), so its process group
  contains it and everything it spawns, and a terminal's Ctrl-C does not reach it directly;
* stdout and stderr go to a log file supplied by the caller, whose tail ends up in every
  error message (``stdout_pipe=True`` keeps stdout for the caller, :attr:`OwnedProcess.stdout`:
  a program that reports its results there, one JSON line each);
* readiness is an async probe polled while racing the process's exit and a deadline, so a
  crash is reported at once instead of after the timeout, and no fixed sleep is needed;
* stop is SIGTERM to the process group, a bounded wait, then SIGKILL — always by group id,
  never by name — and it returns only when no live member of the group is left;
* every group is registered with :data:`safety_net`, which kills it when the interpreter
  exits or receives SIGTERM, for the cases where ``stop`` never runs.

:class:`~harness.clusters.incarnations.Incarnations` runs one program again and again on
the same ports (faults).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import logging
import os
import shlex
import signal
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import KW_ONLY, InitVar, dataclass, field
from pathlib import Path
from types import FrameType
from typing import IO

from harness.aio import Service
from harness.clusters import procfs
from harness.errors import ProcessError, ProcessExitedEarly, ProcessNotReady

logger = logging.getLogger("harness.clusters.process")

Probe = Callable[[], Awaitable[bool]]
"""Readiness check: True when ready; False, or raising :class:`NotReady`, ``OSError`` or
``TimeoutError``, when not yet. Anything else it raises aborts the start."""

LOG_TAIL_LINES = 25


class NotReady(Exception):
    """Raised by a probe to say "not ready yet" with a reason worth showing to the user."""


class SafetyNet:
    """The last resort for process groups whose owner never got to stop them: when
    :meth:`OwnedProcess.stop` never runs (an unhandled Ctrl-C, SIGTERM to the harness), etcd
    and the API servers would outlive the interpreter. The groups still registered are
    killed at interpreter exit (which also follows an unhandled Ctrl-C) and on SIGTERM if
    nobody else handles that signal. Module-level on purpose: it must outlive every owner."""

    def __init__(self) -> None:
        self._groups: dict[int, str] = {}
        self._lock = threading.Lock()
        self._installed = False

    def register(self, pgid: int, name: str) -> None:
        with self._lock:
            self._groups[pgid] = name
            if not self._installed:
                self._installed = True
                atexit.register(self.kill_all)
                self._install_sigterm_handler()

    def unregister(self, pgid: int) -> None:
        with self._lock:
            self._groups.pop(pgid, None)

    def owned(self) -> dict[int, str]:
        with self._lock:
            return dict(self._groups)

    def kill_all(self) -> None:
        with self._lock:
            groups, self._groups = self._groups, {}
        for pgid in groups:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)

    def _install_sigterm_handler(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            return  # someone else owns SIGTERM; atexit still covers a clean exit

        def on_sigterm(signum: int, frame: FrameType | None) -> None:
            self.kill_all()
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)

        signal.signal(signal.SIGTERM, on_sigterm)


safety_net = SafetyNet()


def owned_process_groups() -> dict[int, str]:
    """Process groups started by :class:`OwnedProcess` and not yet stopped (pgid → name)."""
    return safety_net.owned()


@dataclass
class ProcessRecord:
    """What a report needs to know about one owned process; filled in as it runs."""

    name: str
    argv: tuple[str, ...]
    log_path: Path
    pid: int | None = None
    started_at: float | None = None  # wall clock (time.time()) when it was spawned
    ready_after: float | None = None  # seconds from spawn until the probe passed
    exit_code: int | None = None  # negative: killed by that signal (asyncio's convention)
    stop_signal: str | None = None  # "SIGTERM", "SIGKILL" or None if it exited on its own


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    """The last ``lines`` lines of a log file ("" if it does not exist)."""
    try:
        with path.open("rb") as f:
            tail = deque(f, maxlen=lines)
    except FileNotFoundError:
        return ""
    return b"".join(tail).decode("utf-8", "replace").rstrip("\n")


def with_log_tail(headline: str, path: Path, lines: int = LOG_TAIL_LINES) -> str:
    """``headline``, the last ``lines`` lines of the log at ``path`` and where the full log is."""
    tail = log_tail(path, lines)
    body = f"\n--- last {lines} lines of {path} ---\n{tail}" if tail else ""
    return f"{headline}{body}\n--- full log: {path}"


@dataclass(eq=False)
class OwnedProcess(Service):
    """Owns one external process from spawn to reaping; use as ``async with``.

    Entering is :meth:`start`; leaving (normally, by exception or by cancellation) stops
    the process group.
    """

    name: str
    argv: InitVar[Sequence[str]]
    _: KW_ONLY
    log_path: InitVar[Path]
    probe: Probe | None = None
    ready_timeout: float = 20.0
    probe_timeout: float = 5.0
    poll_interval: float = 0.05
    stop_timeout: float = 10.0
    env: Mapping[str, str] | None = None
    cwd: Path | None = None
    stdout_pipe: bool = False
    record: ProcessRecord = field(init=False)
    _proc: asyncio.subprocess.Process | None = field(default=None, init=False)
    _pgid: int | None = field(default=None, init=False)
    _spawned_at: float = field(default=0.0, init=False)  # loop time

    def __post_init__(self, argv: Sequence[str], log_path: Path) -> None:
        self.record = ProcessRecord(name=self.name, argv=tuple(argv), log_path=log_path)
        self.env = dict(self.env) if self.env is not None else None

    # -- facts ------------------------------------------------------------------------

    @property
    def pid(self) -> int | None:
        return self.record.pid

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.returncode is None

    def rss_bytes(self) -> int | None:
        """Resident memory of the process itself (not its children), if it is running."""
        return procfs.rss_bytes(self.record.pid) if self.running and self.record.pid else None

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        return log_tail(self.record.log_path, lines)

    @property
    def stdout(self) -> asyncio.StreamReader:
        """The process's stdout (only with ``stdout_pipe=True``); EOF once it exited."""
        proc = self._require_started()
        if proc.stdout is None:
            raise ProcessError(f"{self.name} was started without stdout_pipe")
        return proc.stdout

    # -- lifecycle --------------------------------------------------------------------

    async def start(self) -> None:
        """Launch the process and wait for ``probe``; one that exits first or misses the
        deadline is stopped again (:class:`ProcessExitedEarly`, :class:`ProcessNotReady`)."""
        await self.launch()
        try:
            await self.wait_ready()
        except BaseException:
            await self.stop()
            raise

    async def launch(self) -> None:
        """Spawn the process in a new session with its output appended to the log file (not
        waiting for readiness: a caller reading its stdout starts reading first)."""
        if self._proc is not None:
            raise ProcessError(f"{self.name} was already started (pid {self.record.pid})")
        log = self._open_log()
        try:
            self._proc = await asyncio.create_subprocess_exec(
                *self.record.argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE if self.stdout_pipe else log,
                stderr=log if self.stdout_pipe else asyncio.subprocess.STDOUT,
                start_new_session=True,
                env=self.env,
                cwd=self.cwd,
            )
        except OSError as e:
            raise ProcessError(
                f"{self.name} could not be started: {e}; command: {shlex.join(self.record.argv)}"
            ) from e
        finally:
            log.close()  # the child holds its own descriptor
        self._spawned_at = asyncio.get_running_loop().time()
        self.record.pid = self._proc.pid
        self.record.started_at = time.time()
        # start_new_session makes the child a session and group leader: pgid == pid.
        self._pgid = self._proc.pid
        safety_net.register(self._pgid, self.name)

    def _open_log(self) -> IO[bytes]:
        path = self.record.log_path
        path.parent.mkdir(parents=True, exist_ok=True)
        log = path.open("ab")
        log.write(f"### {time.strftime('%H:%M:%S')} {shlex.join(self.record.argv)}\n".encode())
        log.flush()
        return log

    async def wait_ready(self) -> None:
        """Poll the probe until it passes, racing the process's exit and the deadline."""
        proc = self._require_started()
        if self.probe is None:
            self.record.ready_after = 0.0
            return
        loop = asyncio.get_running_loop()
        deadline = self._spawned_at + self.ready_timeout
        exited = asyncio.ensure_future(proc.wait())
        last_reason = "no probe finished yet"
        try:
            while True:
                remaining = deadline - loop.time()
                if exited.done():
                    raise self._exited_early_error(loop.time())
                if remaining <= 0:
                    raise self._not_ready_error(last_reason)
                probing = asyncio.ensure_future(
                    self._probe_once(min(self.probe_timeout, remaining))
                )
                await asyncio.wait({probing, exited}, return_when=asyncio.FIRST_COMPLETED)
                if not probing.done():  # the process exited while we were probing
                    probing.cancel()
                    await asyncio.wait({probing})
                    continue
                ready, reason = probing.result()
                if ready:
                    self.record.ready_after = loop.time() - self._spawned_at
                    return
                last_reason = reason
                pause = min(self.poll_interval, max(0.0, deadline - loop.time()))
                await asyncio.wait({exited}, timeout=pause)
        finally:
            if not exited.done():
                exited.cancel()
                await asyncio.wait({exited})

    async def _probe_once(self, limit: float) -> tuple[bool, str]:
        assert self.probe is not None
        try:
            async with asyncio.timeout(limit):
                return (await self.probe(), "probe said not ready")
        except NotReady as e:
            return False, str(e)
        except TimeoutError:
            return False, f"probe did not answer within {limit:.1f} s"
        except OSError as e:
            return False, f"{type(e).__name__}: {e}"

    async def stop(self) -> int | None:
        """Stop the whole process group; return the leader's exit code (None if never started).

        SIGTERM to the group, wait up to ``stop_timeout`` for every member, then SIGKILL.
        If the caller is cancelled meanwhile, the group is killed before re-raising.
        """
        proc = self._proc
        if proc is None or self._pgid is None:
            return None
        pgid = self._pgid
        try:
            if procfs.group_members(pgid):  # leader, or members it left behind
                self._signal_group(signal.SIGTERM)
            loop = asyncio.get_running_loop()
            deadline = loop.time() + self.stop_timeout
            try:
                async with asyncio.timeout(self.stop_timeout):
                    await proc.wait()
            except TimeoutError:
                self._signal_group(signal.SIGKILL)
                await proc.wait()
            # The leader is reaped; members it left behind got the same SIGTERM.
            if not await self._group_gone_by(deadline):
                self._signal_group(signal.SIGKILL)
                if not await self._group_gone_by(loop.time() + 5.0):
                    raise ProcessError(
                        f"{self.name}: process group {pgid} survived SIGKILL: "
                        f"{procfs.group_members(pgid)}"
                    )
        except BaseException:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
            raise
        finally:
            if not procfs.group_members(pgid):  # else the safety net still has to kill it
                safety_net.unregister(pgid)
        self.record.exit_code = proc.returncode
        return proc.returncode

    async def kill(self) -> int | None:
        """SIGKILL to the whole group first (a crash: no drain, no goodbye), then reap it as
        :meth:`stop` does; return the leader's exit code (None if never started)."""
        if self._proc is None or self._pgid is None:
            return None
        self._signal_group(signal.SIGKILL)
        return await self.stop()

    async def _group_gone_by(self, deadline: float) -> bool:
        assert self._pgid is not None
        loop = asyncio.get_running_loop()
        while procfs.group_members(self._pgid):
            if loop.time() >= deadline:
                return False
            await asyncio.sleep(0.02)  # polling a condition, not waiting for readiness
        return True

    def _signal_group(self, sig: signal.Signals) -> None:
        assert self._pgid is not None
        try:
            os.killpg(self._pgid, sig)
        except ProcessLookupError:
            return
        if self.record.stop_signal != "SIGKILL":
            self.record.stop_signal = sig.name

    def _require_started(self) -> asyncio.subprocess.Process:
        if self._proc is None:
            raise ProcessError(f"{self.name} has not been started")
        return self._proc

    # -- error messages ---------------------------------------------------------------

    def _exited_early_error(self, now: float) -> ProcessExitedEarly:
        proc = self._require_started()
        self.record.exit_code = proc.returncode
        headline = (
            f"{self.name} exited with code {proc.returncode} before it was ready "
            f"(after {now - self._spawned_at:.1f} s; pid {proc.pid})"
        )
        return ProcessExitedEarly(with_log_tail(headline, self.record.log_path))

    def _not_ready_error(self, last_reason: str) -> ProcessNotReady:
        headline = (
            f"{self.name} not ready after {self.ready_timeout:.1f} s "
            f"(still running, pid {self.record.pid}); last probe: {last_reason}"
        )
        return ProcessNotReady(with_log_tail(headline, self.record.log_path))
