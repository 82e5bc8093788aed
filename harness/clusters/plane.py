"""Cluster backends: how a test gets a set of named clusters (KCP and SKRs).

A :class:`ClusterBackend` turns names into a running :class:`Environment` for the duration
of an ``async with``. The ``local`` backend (:class:`LocalBackend`) is one shared etcd plus
one kube-apiserver per name, each under its own etcd prefix: a real API server per cluster,
no containers, a couple of seconds to start (the kind and kubeconfig backends implement
the same protocol).

Start-up is composed with :class:`~contextlib.AsyncExitStack`: etcd first, then all API
servers concurrently; if any fails, the ones already running and etcd are stopped before
the error propagates, and leaving the ``async with`` stops everything in reverse order.

Command line (time-to-ready and memory, for docs/benchmarks)::

    python -m harness.clusters.plane up kcp skr-a skr-b skr-c [--hold]
"""

from __future__ import annotations

import argparse
import asyncio
import re
import shutil
import ssl
import tempfile
import time
from collections.abc import AsyncIterator, Coroutine, Mapping, Sequence
from contextlib import (
    AbstractAsyncContextManager,
    AbstractContextManager,
    AsyncExitStack,
    asynccontextmanager,
    nullcontext,
)
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.config import new_client_from_config
from rich.console import Console
from rich.markup import escape

from harness.aio import gather_all
from harness.clusters import procfs
from harness.clusters.apiserver import ApiServerOptions, KubeApiServer
from harness.clusters.binaries import Binaries, ensure_binaries
from harness.clusters.etcd import Etcd
from harness.clusters.process import ProcessRecord
from harness.clusters.progress import format_bytes, interactive, make_console
from harness.errors import ClusterError
from harness.kube.crds import load_yaml_documents

USER_AGENT = "watcher-harness"
"""Also the field manager the API server records for the harness's writes."""
T = TypeVar("T")
_CLUSTER_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?$")


class ApiServerControl:
    """Take one cluster's API server away and bring it back (fault scenarios).

    Same port, certificates and etcd prefix after :meth:`start`, so kubeconfigs, API
    clients and webhook configurations stay valid and every object survives in etcd.
    Each method returns once the server is really down (reaped) or up (ready).
    """

    def __init__(self, server: KubeApiServer) -> None:
        self._server = server

    @property
    def name(self) -> str:
        return self._server.name

    @property
    def running(self) -> bool:
        return self._server.running

    @property
    def records(self) -> tuple[ProcessRecord, ...]:
        """Every incarnation (pid, argv, exit code, stop signal), oldest first."""
        return tuple(self._server.records)

    async def _run(self, call: Coroutine[Any, Any, T]) -> T:
        """Where the server's own calls run (a pool's: on the pool's loop)."""
        return await call

    async def stop(self) -> int | None:
        return await self._run(self._server.stop())

    async def kill(self) -> int | None:
        return await self._run(self._server.kill())

    async def start(self) -> None:
        await self._run(self._server.start())

    async def restart(self) -> None:
        await self._run(self._server.restart())


@dataclass(frozen=True)
class Cluster:
    """One running cluster as a test sees it: where it is and how to log in as admin."""

    name: str
    server: str  # https://127.0.0.1:<port>
    kubeconfig: Path  # admin kubeconfig referring to the certificate files below
    ca_file: Path | None  # None: the system trust store (kubeconfig backend)
    client_cert_file: Path | None  # None: a token in the kubeconfig (kubeconfig backend)
    client_key_file: Path | None
    process: ProcessRecord | None  # the kube-apiserver's first run; None if not ours
    kubeconfig_embedded: str = field(repr=False)  # self-contained, e.g. for a Secret
    control: ApiServerControl | None = field(default=None, repr=False, compare=False)
    """Stop/kill/start the API server (None for backends that cannot)."""

    def ssl_context(self) -> ssl.SSLContext:
        """TLS client context for raw HTTPS calls: trusts the server, presents the admin."""
        ctx = ssl.create_default_context(cafile=str(self.ca_file) if self.ca_file else None)
        if self.client_cert_file is not None and self.client_key_file is not None:
            ctx.load_cert_chain(str(self.client_cert_file), str(self.client_key_file))
        return ctx

    @asynccontextmanager
    async def api_client(self) -> AsyncIterator[ApiClient]:
        """A kubernetes_asyncio client logged in as admin, closed on exit.

        Its user agent ``watcher-harness`` names it as the field manager of everything it
        writes, which is how a backend on shared clusters tells the harness's objects apart.
        """
        client = await new_client_from_config(
            config_file=str(self.kubeconfig), persist_config=False
        )
        client.user_agent = USER_AGENT
        async with client:
            yield client


@dataclass(frozen=True)
class Environment:
    """The clusters of one run plus what reports need (timings, processes, memory)."""

    backend: str
    clusters: Mapping[str, Cluster]
    processes: tuple[ProcessRecord, ...]  # etcd first, then the API servers
    startup_seconds: float  # from the first spawn until every cluster was ready
    temp_dirs: tuple[Path, ...]  # created by the backend and deleted when it stops

    def __getitem__(self, name: str) -> Cluster:
        try:
            return self.clusters[name]
        except KeyError:
            raise KeyError(f"no cluster {name!r}; have {sorted(self.clusters)}") from None

    def control(self, name: str) -> ApiServerControl:
        """Stop/kill/start cluster ``name``'s API server (see :class:`ApiServerControl`)."""
        control = self[name].control
        if control is None:
            raise ClusterError(f"the {self.backend} backend cannot stop or start {name!r}")
        return control

    def rss_bytes(self) -> dict[str, int]:
        """Resident memory per running process (name → bytes), read from /proc."""
        rss = {}
        for record in self.processes:
            value = procfs.rss_bytes(record.pid) if record.pid else None
            if value is not None:
                rss[record.name] = value
        return rss

    def summary(self) -> str:
        """One line per process with its time-to-ready and memory, then the totals."""
        rss = self.rss_bytes()
        lines = [
            f"{r.name:<28} pid {r.pid:<7} ready after {r.ready_after or 0.0:5.1f} s  "
            f"RSS {format_bytes(rss.get(r.name, 0)):>10}"
            for r in self.processes
        ]
        lines.append(
            f"{len(self.clusters)} clusters ready in {self.startup_seconds:.1f} s; "
            f"total RSS {format_bytes(sum(rss.values()))}"
        )
        return "\n".join(lines)


class ClusterBackend(Protocol):
    """Something that can provide named clusters for the duration of an ``async with``."""

    name: str

    def start(self, names: Sequence[str]) -> AbstractAsyncContextManager[Environment]:
        """Start clusters ``names`` (e.g. ``["kcp", "skr-a"]``); stop them on exit."""
        ...


def validate_cluster_names(names: Sequence[str]) -> list[str]:
    """Names become etcd prefixes and directory names: short DNS labels, no duplicates."""
    if not names:
        raise ClusterError("at least one cluster name is required")
    bad = [n for n in names if not _CLUSTER_NAME.match(n)]
    if bad:
        raise ClusterError(
            f"invalid cluster names {bad}: use lower-case letters, digits and '-' "
            "(at most 40 characters, starting and ending with a letter or digit)"
        )
    duplicates = sorted({n for n in names if list(names).count(n) > 1})
    if duplicates:
        raise ClusterError(f"duplicate cluster names: {duplicates}")
    return list(names)


def crd_documents(crds: Mapping[str, Sequence[Path]] | None) -> dict[str, list[dict[str, Any]]]:
    """CRD files per cluster name → their documents per cluster name."""
    return {
        name: [d for p in paths for d in load_yaml_documents(p)]
        for name, paths in (crds or {}).items()
    }


class LocalBackend:
    """One shared etcd and one kube-apiserver per cluster, all on 127.0.0.1."""

    name = "local"

    def __init__(
        self,
        binaries: Binaries,
        *,
        log_dir: Path | None = None,
        ready_timeout: float = 60.0,
        extra_args: Mapping[str, Sequence[str]] | None = None,
        crds: Mapping[str, Sequence[Path]] | None = None,
        console: Console | None = None,
    ) -> None:
        """``log_dir`` keeps the logs after the run (default: a temp dir deleted with it).

        ``extra_args`` adds kube-apiserver flags per cluster name; ``crds`` (CRD files per
        cluster name) are created while the API servers finish starting
        (:class:`~harness.clusters.apiserver.KubeApiServer`).
        """
        self.binaries = binaries
        self.log_dir = log_dir
        self.ready_timeout = ready_timeout
        self.extra_args = dict(extra_args or {})
        self.crds = crd_documents(crds)
        self.console = console or make_console()

    @asynccontextmanager
    async def start(self, names: Sequence[str]) -> AsyncIterator[Environment]:
        names = validate_cluster_names(names)
        async with AsyncExitStack() as stack:
            temp_dirs: list[Path] = []
            log_dir = self.log_dir
            if log_dir is None:
                log_dir = Path(tempfile.mkdtemp(prefix="watcher-harness-logs-"))
                stack.callback(shutil.rmtree, log_dir, ignore_errors=True)
                temp_dirs.append(log_dir)
            log_dir.mkdir(parents=True, exist_ok=True)
            started = time.monotonic()
            with self._status(f"starting etcd and {', '.join(names)}"):
                etcd = await stack.enter_async_context(
                    Etcd(self.binaries.etcd, log_path=log_dir / "etcd.log")
                )
                servers = [
                    KubeApiServer(
                        self.binaries.kube_apiserver,
                        name=name,
                        etcd_url=etcd.client_url,
                        log_path=log_dir / f"kube-apiserver-{name}.log",
                        ready_timeout=self.ready_timeout,
                        options=ApiServerOptions(extra_args=tuple(self.extra_args.get(name, ()))),
                        crds=self.crds.get(name, ()),
                    )
                    for name in names
                ]
                await _enter_concurrently(stack, servers)
            assert etcd.process is not None and etcd.data_dir is not None
            temp_dirs.append(etcd.data_dir)
            env = Environment(
                backend=self.name,
                clusters={s.name: server_cluster(s, ApiServerControl(s)) for s in servers},
                processes=(etcd.process.record, *(s.records[-1] for s in servers)),
                startup_seconds=time.monotonic() - started,
                temp_dirs=(*temp_dirs, *(s.workdir for s in servers if s.workdir)),
            )
            if interactive(self.console):
                self.console.print(escape(env.summary()))
            yield env

    def _status(self, text: str) -> AbstractContextManager[object]:
        """A spinner at a terminal; nothing in CI or when piped."""
        if interactive(self.console):
            return self.console.status(escape(text))
        return nullcontext()


def server_cluster(
    server: KubeApiServer,
    control: ApiServerControl,
    *,
    name: str | None = None,
    kubeconfig: Path | None = None,
) -> Cluster:
    """``server`` as cluster ``name`` (default: the server's), its admin kubeconfig at
    ``kubeconfig`` (default: the server's own)."""
    files = server.files
    assert files is not None
    return Cluster(
        name=name or server.name,
        server=server.url,
        kubeconfig=kubeconfig or files.kubeconfig,
        ca_file=files.ca_file,
        client_cert_file=files.client_cert_file,
        client_key_file=files.client_key_file,
        process=server.records[-1],
        kubeconfig_embedded=server.kubeconfig_text(embed=True, name=name),
        control=control,
    )


async def _enter_concurrently(stack: AsyncExitStack, servers: Sequence[KubeApiServer]) -> None:
    """Start all API servers at once; on any failure the others are stopped too.

    A server that fails or is cancelled mid-start cleans up after itself; the ones that
    made it are stopped (concurrently) by a callback registered on ``stack`` beforehand.
    """
    entered: list[KubeApiServer] = []

    async def enter(server: KubeApiServer) -> None:
        await server.__aenter__()
        entered.append(server)

    stack.push_async_callback(
        lambda: gather_all(
            [s.close() for s in reversed(entered)],
            lambda errors: ClusterError(f"{len(errors)} API servers failed to stop: {errors}"),
        )
    )
    try:
        async with asyncio.TaskGroup() as group:
            for server in servers:
                group.create_task(enter(server), name=f"start kube-apiserver[{server.name}]")
    except BaseExceptionGroup as group_error:
        errors = group_error.exceptions
        if len(errors) == 1:
            raise errors[0] from None
        raise ClusterError(
            f"{len(errors)} API servers failed to start:\n\n" + "\n\n".join(map(str, errors))
        ) from group_error


# -- command line ---------------------------------------------------------------------


async def _up(names: Sequence[str], hold: bool, log_dir: Path | None) -> None:
    console = make_console()
    binaries = await asyncio.to_thread(ensure_binaries, console=console)
    backend = LocalBackend(binaries, log_dir=log_dir, console=console)
    async with backend.start(names) as env:
        if not interactive(console):  # else the backend has shown it already
            print(env.summary())
        for cluster in env.clusters.values():
            print(f"{cluster.name}: {cluster.server} kubeconfig={cluster.kubeconfig}")
        if hold:
            print("clusters are up; press Ctrl-C to stop them")
            await asyncio.Event().wait()  # until cancelled by Ctrl-C


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m harness.clusters.plane",
        description="Start local clusters, print time-to-ready and memory, stop them.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start clusters (default: kcp skr-a skr-b skr-c)")
    up.add_argument("names", nargs="*", default=["kcp", "skr-a", "skr-b", "skr-c"])
    up.add_argument("--hold", action="store_true", help="keep them running until Ctrl-C")
    up.add_argument("--log-dir", type=Path, help="keep process logs here")
    args = parser.parse_args(argv)
    try:
        asyncio.run(_up(args.names, args.hold, args.log_dir))
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
