"""API servers that one process hands from scenario to scenario, reset in between.

Why: every environment started an etcd and one kube-apiserver per cluster — 0.87 s of CPU
and ~2.5 s of waiting per server on 2 cores (a third of ``make e2e``'s CPU went to API
servers starting). A scenario gets its clusters from the pool instead: servers already
running, with the flavor's CRDs Established long ago, so not even kube-apiserver's 2 s
hold on a new CRD's first creates (:mod:`harness.kube.crds`) is paid again.

"As if new": when a scenario is done, every etcd key under its server's prefix that was not
there when the server was first handed out is deleted (:mod:`harness.clusters.etcd_keys`):
objects, namespaces, webhook configurations, RBAC, CRDs of its own. kube-apiserver follows
etcd's watch, so its caches and informers drop them too. The next scenario finds the
bootstrap state and the flavor's CRDs — what a fresh server would have. A server is not
reused but stopped when a fault took its process away (stop, kill, restart), when a
system namespace or one of the flavor's CRDs was changed, or when it is not ready.

The pool lives as long as the process (a pytest worker): its processes run on an event
loop of its own, in a thread, because each scenario runs in its own ``asyncio.run``. A
scenario's calls to the pool — take, give back, stop/start an API server for a fault — are
run on that loop (:meth:`ClusterPool.call`). Each server is still owned by one object and
stopped by PID when the pool closes (or, at the latest, by the safety net at exit).

``open_backend`` uses the pool that :data:`CURRENT` holds (set around scenario items by the
pytest plugin's ``--cluster-pool``); a pool hands out local clusters only.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import json
import logging
import shutil
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Coroutine, Mapping, Sequence
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

import aiohttp

from harness.aio import gather_all
from harness.clusters.apiserver import CRDS_PATH, KubeApiServer
from harness.clusters.binaries import Binaries
from harness.clusters.etcd import Etcd
from harness.clusters.etcd_keys import EtcdKeys, reset_plan
from harness.clusters.plane import (
    ApiServerControl,
    Cluster,
    Environment,
    server_cluster,
    validate_cluster_names,
)
from harness.clusters.probes import http_get
from harness.errors import ClusterError
from harness.kube.crds import is_established

logger = logging.getLogger("harness.clusters.pool")

T = TypeVar("T")
Obj = Mapping[str, Any]

ESTABLISHED_WITHIN_S = 30.0


def flavor_of(crds: Sequence[Obj]) -> str:
    """Servers with the same CRDs are interchangeable."""
    return hashlib.sha256(json.dumps(list(crds), sort_keys=True).encode()).hexdigest()[:16]


@dataclass(eq=False)
class PooledServer:
    """One API server of the pool, with what it looked like when it was new."""

    server: KubeApiServer
    flavor: str
    keys: EtcdKeys
    baseline: dict[str, int] = field(default_factory=dict)
    crd_specs: dict[str, Any] = field(default_factory=dict)
    incarnations: int = 1

    @property
    def untouched(self) -> bool:
        """Running in the incarnation it was handed out in (no fault stopped it)."""
        return self.server.running and len(self.server.records) == self.incarnations


class PooledControl(ApiServerControl):
    """Fault control of a pooled API server: each call runs on the pool's loop."""

    def __init__(self, server: KubeApiServer, pool: ClusterPool) -> None:
        super().__init__(server)
        self._pool = pool

    async def _run(self, call: Coroutine[Any, Any, T]) -> T:
        return await self._pool.call(call)


class ClusterPool:
    """Running API servers (and their etcd) kept for the next scenario; see the module."""

    def __init__(self, binaries: Binaries, *, ready_timeout: float = 60.0) -> None:
        self.binaries = binaries
        self.ready_timeout = ready_timeout
        self.log_dir = Path(tempfile.mkdtemp(prefix="watcher-harness-pool-"))
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="cluster-pool", daemon=True
        )
        self._thread.start()
        self._etcd: Etcd | None = None
        self._session: aiohttp.ClientSession | None = None
        self._servers: list[PooledServer] = []
        self._idle: dict[str, list[PooledServer]] = {}
        self._numbers = itertools.count(1)
        self.reused = 0
        self.started = 0

    async def call(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the pool's loop (where its processes are owned) and await it."""
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self._loop))

    # -- on the pool's loop ---------------------------------------------------------

    async def _etcd_url(self) -> str:
        if self._etcd is None:
            etcd = Etcd(self.binaries.etcd, log_path=self.log_dir / "etcd.log")
            await etcd.__aenter__()
            self._etcd = etcd
        return self._etcd.client_url

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession()
        return self._session

    async def take(self, wanted: Mapping[str, Sequence[Obj]]) -> dict[str, PooledServer]:
        """A server per name with those CRDs: an idle one, or a new one started now."""
        chosen: dict[str, PooledServer] = {}
        missing: dict[str, Sequence[Obj]] = {}
        for name, crds in wanted.items():
            idle = self._idle.get(flavor_of(crds), [])
            if idle:
                chosen[name] = idle.pop()
                self.reused += 1
            else:
                missing[name] = crds
        try:
            etcd_url = await self._etcd_url() if missing else ""  # one etcd, before the servers
            started = await asyncio.gather(
                *(self._new(crds, etcd_url) for crds in missing.values())
            )
        except BaseException:
            await asyncio.gather(*(self.give_back(p) for p in chosen.values()))
            raise
        chosen.update(zip(missing, started, strict=True))
        return chosen

    async def _new(self, crds: Sequence[Obj], etcd_url: str) -> PooledServer:
        name = f"pool-{next(self._numbers)}"
        server = KubeApiServer(
            self.binaries.kube_apiserver,
            name=name,
            etcd_url=etcd_url,
            log_path=self.log_dir / f"kube-apiserver-{name}.log",
            ready_timeout=self.ready_timeout,
            crds=crds,
        )
        await server.__aenter__()
        pooled = PooledServer(
            server, flavor_of(crds), EtcdKeys(self._http(), server.etcd_url, f"/{name}/")
        )
        self._servers.append(pooled)
        self.started += 1
        try:
            pooled.crd_specs = await self._established_specs(server, len(crds))
            pooled.baseline = await pooled.keys.list()
        except BaseException:
            await self._drop(pooled)
            raise
        return pooled

    async def _crd_specs(self, server: KubeApiServer) -> tuple[dict[str, Any], bool]:
        """The server's CRDs (name → spec), and whether all are Established."""
        assert server.files is not None
        status, body = await http_get(
            self._http(), f"{server.url}{CRDS_PATH}", ssl_context=server.files.ssl_context()
        )
        if status != 200:
            raise ClusterError(f"kube-apiserver[{server.name}]: listing CRDs: {status}")
        items = json.loads(body).get("items") or []
        established = all(is_established(crd) for crd in items)
        return {crd["metadata"]["name"]: crd["spec"] for crd in items}, established

    async def _established_specs(self, server: KubeApiServer, count: int) -> dict[str, Any]:
        deadline = time.monotonic() + ESTABLISHED_WITHIN_S
        while True:
            specs, established = await self._crd_specs(server)
            if established and len(specs) >= count:
                return specs
            if time.monotonic() > deadline:
                raise ClusterError(f"kube-apiserver[{server.name}]: CRDs not Established")
            await asyncio.sleep(0.05)

    async def give_back(self, pooled: PooledServer) -> None:
        """Reset ``pooled`` to its baseline and keep it, or stop it (see the module)."""
        try:
            reason = await self._reset(pooled)
        except (ClusterError, aiohttp.ClientError, OSError) as e:
            reason = f"reset failed: {e}"
        if reason is None:
            self._idle.setdefault(pooled.flavor, []).append(pooled)
            return
        logger.info("pool: %s not reused: %s", pooled.server.name, reason)
        await self._drop(pooled)

    async def _reset(self, pooled: PooledServer) -> str | None:
        if not pooled.untouched:
            return "its process was stopped or restarted"
        specs, _ = await self._crd_specs(pooled.server)
        if any(specs.get(name) != spec for name, spec in pooled.crd_specs.items()):
            return "a CRD of its flavor was changed or deleted"
        plan = reset_plan(pooled.keys.prefix, pooled.baseline, await pooled.keys.list())
        if plan.refused is not None:
            return plan.refused
        await pooled.keys.delete(plan.delete)
        return None

    async def _drop(self, pooled: PooledServer) -> None:
        self._servers.remove(pooled)
        await pooled.server.close()

    async def _close(self) -> None:
        self._idle.clear()
        servers, self._servers = self._servers, []
        try:
            await gather_all(
                (p.server.close() for p in servers),
                lambda errors: ClusterError(f"{len(errors)} pooled API servers failed to stop"),
            )
        finally:
            if self._etcd is not None:
                await self._etcd.close()
            if self._session is not None:
                await self._session.close()

    # -- from any thread but the pool's -------------------------------------------

    def close(self, timeout: float = 60.0) -> None:
        """Stop every server and etcd (by PID), then the loop; delete the logs."""
        try:
            asyncio.run_coroutine_threadsafe(self._close(), self._loop).result(timeout)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout)
            if not self._thread.is_alive():
                self._loop.close()
            shutil.rmtree(self.log_dir, ignore_errors=True)


CURRENT: ContextVar[ClusterPool | None] = ContextVar("cluster_pool", default=None)
"""The pool ``open_backend`` takes local clusters from (None: start them per environment)."""


def _copy_since(source: Path, offset: int, target: Path) -> None:
    """What ``source`` got since ``offset``: one scenario's part of a pooled server's log."""
    with contextlib.suppress(OSError), source.open("rb") as f:
        f.seek(offset)
        target.write_bytes(f.read())


def _log_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


class PooledBackend:
    """The local backend's clusters, taken from a :class:`ClusterPool` and given back."""

    name = "local"

    def __init__(
        self,
        pool: ClusterPool,
        *,
        log_dir: Path | None = None,
        crds: Mapping[str, Sequence[Obj]] | None = None,
    ) -> None:
        self.pool = pool
        self.log_dir = log_dir
        self.crds = dict(crds or {})

    @asynccontextmanager
    async def start(self, names: Sequence[str]) -> AsyncIterator[Environment]:
        names = validate_cluster_names(names)
        began = time.monotonic()
        wanted = {name: self.crds.get(name, ()) for name in names}
        taken = await self.pool.call(self.pool.take(wanted))
        for pooled in taken.values():
            pooled.incarnations = len(pooled.server.records)
        offsets = {n: _log_size(p.server.log_path) for n, p in taken.items()}
        workdir = Path(tempfile.mkdtemp(prefix="watcher-harness-lease-"))
        try:
            clusters = {n: self._cluster(n, p.server, workdir) for n, p in taken.items()}
            yield Environment(
                backend=self.name,
                clusters=clusters,
                processes=tuple(self._record(n, p.server) for n, p in taken.items()),
                startup_seconds=time.monotonic() - began,
                temp_dirs=(workdir,),
            )
        finally:
            if self.log_dir is not None:
                self.log_dir.mkdir(parents=True, exist_ok=True)
                for n, p in taken.items():
                    _copy_since(p.server.log_path, offsets[n], self._log_path(n))
            shutil.rmtree(workdir, ignore_errors=True)
            await asyncio.gather(*(self.pool.call(self.pool.give_back(p)) for p in taken.values()))

    def _log_path(self, name: str) -> Path:
        assert self.log_dir is not None
        return self.log_dir / f"kube-apiserver-{name}.log"

    def _record(self, name: str, server: KubeApiServer) -> Any:
        record = server.records[-1]
        if self.log_dir is None:
            return record
        return replace(record, log_path=self._log_path(name))

    def _cluster(self, name: str, server: KubeApiServer, workdir: Path) -> Cluster:
        kubeconfig = workdir / f"kubeconfig-{name}"
        kubeconfig.write_text(server.kubeconfig_text(embed=False, name=name), encoding="utf-8")
        control = PooledControl(server, self.pool)
        return server_cluster(server, control, name=name, kubeconfig=kubeconfig)
