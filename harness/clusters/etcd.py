"""One etcd on loopback, shared by every local API server (each under its own prefix).

etcd is the only stateful piece of a local cluster; its data lives in a temporary
directory this object creates and deletes, so nothing survives a run. ``--unsafe-no-fsync``
trades durability we do not need for far less disk I/O on a shared CI machine.

It is a single member without peers, so raft's election timeout only delays its first
self-election: with the defaults (100 ms heartbeat, 1 s election timeout) etcd became
healthy 0.2-0.9 s after the spawn, with ``HEARTBEAT_MS``/``ELECTION_MS`` in 0.05-0.15 s
(measured on the 2-core CI machine; every environment waits for it before its API servers).
There is no other member to lose the leadership to, so a loaded machine cannot cause an
election later either.
"""

from __future__ import annotations

import itertools
import json
import shutil
import tempfile
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path

import aiohttp

from harness.aio import Service
from harness.clusters import ports
from harness.clusters.probes import http_probe
from harness.clusters.process import OwnedProcess

HEARTBEAT_MS = 20
ELECTION_MS = 100
"""raft timings of the single member (etcd wants the election timeout >= 5 heartbeats)."""


def _healthy(status: int, body: str) -> bool:
    if status != 200:
        return False
    try:
        return bool(json.loads(body).get("health") == "true")
    except (ValueError, AttributeError):
        return False


@dataclass(eq=False)
class Etcd(Service):
    """An etcd server on 127.0.0.1 with free client and peer ports; use as ``async with``."""

    binary: Path
    _: KW_ONLY
    log_path: Path
    name: str = "etcd"
    ready_timeout: float = 20.0
    host: str = ports.LOOPBACK
    data_dir: Path | None = field(default=None, init=False)
    process: OwnedProcess | None = field(default=None, init=False)
    client_url: str = field(default="", init=False)

    def argv(self, data_dir: Path, client_port: int, peer_port: int) -> list[str]:
        client = f"http://{self.host}:{client_port}"
        peer = f"http://{self.host}:{peer_port}"
        return [
            str(self.binary),
            "--name",
            self.name,
            "--data-dir",
            str(data_dir),
            "--listen-client-urls",
            client,
            "--advertise-client-urls",
            client,
            "--listen-peer-urls",
            peer,
            "--initial-advertise-peer-urls",
            peer,
            "--initial-cluster",
            f"{self.name}={peer}",
            "--unsafe-no-fsync",
            f"--heartbeat-interval={HEARTBEAT_MS}",
            f"--election-timeout={ELECTION_MS}",
        ]

    async def start(self) -> None:
        """A fresh data directory, then etcd on free ports (picked again if one was taken)."""
        data_dir = Path(tempfile.mkdtemp(prefix="watcher-harness-etcd-"))
        self.stack.callback(shutil.rmtree, data_dir, ignore_errors=True)
        self.data_dir = data_dir
        attempts = itertools.count(1)
        async with aiohttp.ClientSession() as session:  # only for the readiness probe

            async def on_free_ports() -> None:
                client_port, peer_port = ports.free_port(self.host), ports.free_port(self.host)
                client_url = f"http://{self.host}:{client_port}"
                process = OwnedProcess(
                    self.name,
                    self.argv(data_dir / f"attempt-{next(attempts)}", client_port, peer_port),
                    log_path=self.log_path,
                    probe=http_probe(session, f"{client_url}/health", _healthy),
                    ready_timeout=self.ready_timeout,
                )
                self.process = await self.stack.enter_async_context(process)
                self.client_url = client_url

            await ports.start_on_free_ports(on_free_ports)
