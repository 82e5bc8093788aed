"""One pod on the node: its container's successive processes, run through
``harness.skr.isolate`` with fresh host ports at each start, readiness probed inside the
pod's network; one that exits is restarted at once, then after 1 s doubling to 10 s."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from harness.clusters import ports
from harness.clusters.process import OwnedProcess, ProcessRecord
from harness.errors import ProcessError
from harness.platform.kubelet import node
from harness.platform.kubelet import pods as plans
from harness.platform.kubelet.pods import CommandFor, LaunchPlan, Obj, PodIdentity, Probe
from harness.platform.kubelet.status import PodView

logger = logging.getLogger("harness.platform.kubelet")
BACKOFF_INITIAL, BACKOFF_MAX, BACKOFF_RESET = 1.0, 10.0, 20.0


@dataclass(frozen=True)
class PodRecord:
    """A snapshot of one pod, as the harness reads it."""

    name: str
    ip: str
    template_hash: str
    ready: bool
    reason: str  # why it is not running or ready ("" when ready)
    restart_count: int
    pid: int | None
    host_ports: Mapping[int, int]  # container port → host port on 127.0.0.1
    log_path: Path
    pod_dir: Path
    env: Mapping[str, str]
    terminating: bool
    last_exit_code: int | None  # as the kubelet reports it: 128 + signal if killed


@dataclass(frozen=True)
class Node:
    """What a pod needs of its kubelet."""

    secrets: Mapping[str, Obj]  # by namespace/name
    commands: CommandFor
    changed: Callable[[], None]
    records: list[ProcessRecord]  # every process started
    python: str


class Pod:
    def __init__(
        self, deployment: Obj, identity: PodIdentity, node: Node, pod_dir: Path, log_path: Path
    ) -> None:
        self.deployment, self.identity, self.node = deployment, identity, node
        self.pod_dir, self.log_path = pod_dir, log_path
        self.key = f"{identity.namespace}/{deployment['metadata']['name']}"
        self.template_hash = identity.labels["pod-template-hash"]
        self.version = (self.template_hash, deployment["metadata"].get("uid"))
        self.ready, self.reason, self.terminating = False, "ContainerCreating", False
        self.failure: str | None = None  # why it cannot run at all (ReplicaFailure)
        self.restart_count, self.last_exit_code = 0, None  # type: int, int | None
        self.plan: LaunchPlan | None = None
        self.process: OwnedProcess | None = None
        self.host_ports: dict[int, int] = {}
        self.wake, self.stopping = asyncio.Event(), asyncio.Event()  # wake: a Secret changed
        self.task: asyncio.Task[None] | None = None

    @property
    def name(self) -> str:
        return self.identity.name

    def view(self) -> PodView:
        pod_ports = self.plan.ports if self.plan is not None else ()
        return PodView(self.identity, pod_ports, self.template_hash, self.ready, self.terminating)

    def record(self) -> PodRecord:
        process, plan = self.process, self.plan
        return PodRecord(
            self.name, self.identity.ip, self.template_hash, self.ready,
            "" if self.ready else self.reason, self.restart_count,
            process.pid if process is not None and process.running else None,
            dict(self.host_ports), self.log_path, self.pod_dir,
            dict(plan.env) if plan is not None else {}, self.terminating, self.last_exit_code,
        )  # fmt: skip

    def _set(self, ready: bool, reason: str) -> None:
        if (self.ready, self.reason) != (ready, reason):
            logger.info("pod %s: %s", self.name, "ready" if ready else reason)
            self.ready, self.reason = ready, reason
            self.node.changed()

    def kill(self) -> int | None:
        """SIGKILL the running container's process group, as a crash; its pid."""
        process = self.process
        if self.terminating or process is None or not process.running or not process.pid:
            return None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)  # its own group: pgid == pid
        process.record.stop_signal = "SIGKILL"
        return process.pid

    def _plan(self) -> LaunchPlan | plans.Unrunnable:
        return plans.launch_plan(
            self.deployment,
            pod=self.identity,
            pod_dir=self.pod_dir,
            secrets=self.node.secrets,
            command_for=self.node.commands,
            host_env=os.environ,
        )

    def secret_changed(self) -> None:
        """Mounted files follow a Secret (no restart); a waiting pod tries again."""
        plan = self._plan()
        if isinstance(plan, LaunchPlan) and self.process is not None:
            for volume in plan.volumes:
                with contextlib.suppress(OSError):
                    node.write_volume(volume)
        self.wake.set()

    async def stop(self, within: float) -> None:
        """SIGTERM, SIGKILL after the grace period; after ``within`` s, kill it all."""
        self.stopping.set()
        if self.task is not None and not (await asyncio.wait({self.task}, timeout=within))[0]:
            self.task.cancel()
            await asyncio.wait({self.task})
        if self.process is not None and self.process.running:
            with contextlib.suppress(ProcessError):
                await self.process.kill()
        shutil.rmtree(self.pod_dir, ignore_errors=True)

    async def _pause(self, seconds: float | None, event: asyncio.Event | None = None) -> None:
        waits = [asyncio.ensure_future(e.wait()) for e in (self.stopping, event) if e]
        await asyncio.wait(waits, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
        for waiting in waits:
            waiting.cancel()

    async def run(self) -> None:
        """Plan, start, watch and restart the container until the pod is to stop."""
        try:
            await self._run()
        except Exception as exc:  # a bug here must not leave the pod looking fine
            logger.exception("pod %s failed", self.name)
            self._set(False, f"KubeletError: {exc!r}")
            return
        self._set(False, "Completed: stopped by the kubelet")

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        crashes, last_crash = 0, 0.0
        while not self.stopping.is_set():
            self.wake.clear()
            plan = self._plan()
            if not isinstance(plan, LaunchPlan):
                self.failure = None if plan.waiting else plan.message
                self._set(
                    False, f"ContainerCreating: {plan.message}" if plan.waiting else plan.message
                )
                await self._pause(None, self.wake)
                continue
            self.failure, self.plan = None, plan
            try:
                process = await self._start(plan)
            except (OSError, ProcessError) as exc:
                self._set(False, f"RunContainerError: {exc}")
                await self._pause(BACKOFF_MAX)
                continue
            await self._lifetime(process, plan.readiness)
            if not self.stopping.is_set():
                self._set(False, "Error: the container exited")
            code = await process.stop()
            self.last_exit_code = code if code is None or code >= 0 else 128 - code
            if self.stopping.is_set():
                return
            crashes = 0 if loop.time() - last_crash > BACKOFF_RESET else crashes
            last_crash = loop.time()
            delay = min(BACKOFF_MAX, BACKOFF_INITIAL * 2 ** (crashes - 1)) if crashes else 0.0
            crashes, self.restart_count = crashes + 1, self.restart_count + 1
            self._set(False, f"CrashLoopBackOff: exit code {code}, back-off {delay:g} s")
            await self._pause(delay)

    async def _start(self, plan: LaunchPlan) -> OwnedProcess:
        self.pod_dir.mkdir(parents=True, exist_ok=True)
        for volume in plan.volumes:
            node.write_volume(volume)
        self.host_ports = {port: ports.free_port() for _, port in plan.ports}
        process = OwnedProcess(
            f"pod {self.identity.namespace}/{self.name}",
            plans.launcher_argv(plan, self.host_ports, python=self.node.python),
            log_path=self.log_path,
            env=plan.env,
            cwd=self.pod_dir,
            stop_timeout=max(plan.grace_seconds, 0.1),
        )
        await process.launch()
        self.node.records.append(process.record)
        self.process = process
        self._set(False, f"started (pid {process.pid}), not ready yet")
        return process

    async def _lifetime(self, process: OwnedProcess, readiness: Probe | None) -> None:
        """Until the process exits or the pod is to stop; readiness probed meanwhile."""
        probing = asyncio.ensure_future(self._probe(readiness, process.pid or 0))
        try:
            while process.running and not self.stopping.is_set():  # noqa: ASYNC110
                await asyncio.sleep(0.05)  # no event tells the exit of a process
        finally:
            probing.cancel()
            await asyncio.gather(probing, return_exceptions=True)

    async def _probe(self, readiness: Probe | None, pgid: int) -> None:
        failures = 0
        while readiness is not None:
            ok, why = await node.probe(readiness, pgid)
            failures = 0 if ok else failures + 1
            if ok or not self.ready or failures >= readiness.failure_threshold:
                self._set(ok, "" if ok else f"Readiness probe failed: {why}")
            await asyncio.sleep(1.0 if readiness.implicit and self.ready else readiness.period)
        self._set(True, "")
