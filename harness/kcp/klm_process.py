"""A Lifecycle Manager as a process of its own — upstream's Go KLM, or any build.

The harness appends KLM's own flags (:class:`KlmFlags`) to the user's command and observes
it only through what it shows anyone: its log (:mod:`harness.kcp.klm_log`), its metrics
(summed over incarnations) and ``/readyz``. :class:`KlmProcess` keeps its ports across
restarts, so the gateway's route to its listener stays valid.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path

from harness.clusters import ports, probes
from harness.clusters.incarnations import CountingIncarnations
from harness.clusters.process import ProcessRecord
from harness.errors import HarnessError
from harness.expect.prom import Sample
from harness.kcp.klm_log import ObservedReconcile, ReconcileHistory, observe, parse_record
from harness.kcp.lifecycle_manager.queue.reconciler import (
    INTERVAL_FLAGS,
    RequeueIntervals,
    first_of,
)

LOG_POLL = 0.05
"""Seconds between looks at the log file for new lines."""


class KlmProcessError(HarnessError, RuntimeError):
    """The KLM process is not in the state the call needs, or did not become ready."""


@dataclass(frozen=True)
class KlmFlags:
    """What the harness tells any KLM, by KLM's flag names (``None``: KLM's default)."""

    intervals: RequeueIntervals | None = None
    workers: int | None = None  # --max-concurrent-kyma-reconciles
    watcher_image_tag: str = "harness"  # --skr-watcher-image-tag (the kubelet maps images)
    extra: tuple[str, ...] = ()  # the user's own flags, passed last

    def argv(self, kubeconfig: Path, metrics: int, probe: int, listener: int) -> list[str]:
        out = [
            f"--kubeconfig={kubeconfig}",
            "--leader-elect=false",
            f"--metrics-bind-address={ports.LOOPBACK}:{metrics}",
            f"--health-probe-bind-address={ports.LOOPBACK}:{probe}",
            f"--kyma-skr-listener-bind-address={ports.LOOPBACK}:{listener}",
            "--log-level=2",
            f"--skr-watcher-image-tag={self.watcher_image_tag}",
        ]
        if self.intervals is not None:
            out += [f"{flag}={getattr(self.intervals, k):g}s" for k, flag in INTERVAL_FLAGS.items()]
        if self.workers is not None:
            out.append(f"--max-concurrent-kyma-reconciles={self.workers}")
        return [*out, *self.extra]


@dataclass
class _Follower:
    """Reads new complete lines of a growing log file, from a byte offset on."""

    path: Path
    offset: int = 0
    partial: bytes = field(default=b"")

    def read(self) -> list[str]:
        try:
            with self.path.open("rb") as handle:
                handle.seek(self.offset)
                chunk = handle.read()
        except FileNotFoundError:
            return []
        self.offset += len(chunk)
        data = self.partial + chunk
        *lines, self.partial = data.split(b"\n")
        return [line.decode("utf-8", "replace") for line in lines]


@dataclass(eq=False)
class KlmProcess(CountingIncarnations):
    """``async with KlmProcess(command, kubeconfig=..., log_path=...) as klm:``; ports:
    metrics, health probe, SKR-event listener."""

    name = "lifecycle-manager"
    error = KlmProcessError

    command: Sequence[str]
    _: KW_ONLY
    kubeconfig: Path
    log_path: Path
    flags: KlmFlags = KlmFlags()
    env: Mapping[str, str] | None = None
    """The command's environment (None: this process's, as it is when constructed)."""
    ready_timeout: float = 60.0
    stop_timeout: float = 15.0
    records: list[ProcessRecord] = field(default_factory=list, init=False)
    history: ReconcileHistory = field(default_factory=ReconcileHistory, init=False)
    """Every reconcile and queued event the log showed, over all incarnations."""
    _scraped: list[list[Sample]] = field(default_factory=list, init=False)
    _changed: asyncio.Event = field(default_factory=asyncio.Event, init=False)
    _follower: _Follower = field(init=False)

    def __post_init__(self) -> None:
        if not self.command:
            raise KlmProcessError("the KLM command is empty")
        self.command = tuple(self.command)
        self.env = dict(os.environ if self.env is None else self.env)
        self._follower = _Follower(self.log_path)

    @property
    def listener_port(self) -> int:
        """Where KLM's SKR-event listener serves (plain HTTP, XFCC from the gateway)."""
        return self._port(2)

    @property
    def metrics_url(self) -> str:
        return f"http://{ports.LOOPBACK}:{self._port(0)}/metrics"

    def argv(self) -> list[str]:
        return [*self.command, *self.flags.argv(self.kubeconfig, *self._ports)]

    async def start(self) -> None:
        """Ready once ``/readyz`` answers; the log is followed from the first start on."""
        if self._session is None:
            self.spawn(self._follow(), "klm-log")
        await super().start()

    def _fresh_ports(self) -> tuple[int, int, int]:
        return ports.free_port(), ports.free_port(), ports.free_port()

    async def _run(self) -> None:
        assert self._session is not None
        probe = probes.readyz_probe(self._session, f"http://{ports.LOOPBACK}:{self._port(1)}")
        process = self._incarnation(self.argv(), probe, self.env)
        self.records.append(process.record)
        await process.start()
        self._scraped.append([])

    async def _ended(self) -> None:
        self._consume()  # the last lines the incarnation wrote

    def _consume(self) -> None:
        for line in self._follower.read():
            record = parse_record(line)
            if record is None:
                continue
            observation = observe(record)
            if observation is not None:
                self.history.add(observation)
                self._changed.set()

    async def _follow(self) -> None:
        while True:
            self._consume()
            await asyncio.sleep(LOG_POLL)

    def reconciles(
        self, kyma: str | None = None, trigger: str | None = None, since: float | None = None
    ) -> list[ObservedReconcile]:
        self._consume()
        return self.history.of(kyma, trigger, since)

    async def wait_for_reconcile(
        self,
        kyma: str,
        trigger: str | None = None,
        since: float | None = None,
        timeout: float = 10.0,  # noqa: ASYNC109 - a deadline for the wait, as tests read it
    ) -> ObservedReconcile:
        """The first reconcile of ``kyma`` (with ``trigger``, since ``since``) in the log."""
        found = await first_of(
            lambda: self.reconciles(kyma, trigger, since), self._changed, timeout
        )
        if found is None:
            seen = self.reconciles(kyma)
            raise KlmProcessError(
                f"no reconcile of {kyma}"
                + (f" triggered by {trigger}" if trigger else "")
                + f" within {timeout:g} s; the log shows {len(seen)} reconcile(s) of it"
                + (f", the last at {seen[-1].at:.3f} ({sorted(seen[-1].triggers)})" if seen else "")
            )
        return found

    def _metrics_url(self) -> str:
        return self.metrics_url

    def __repr__(self) -> str:
        return f"KlmProcess({' '.join(self.command)!r}, running={self.running})"
