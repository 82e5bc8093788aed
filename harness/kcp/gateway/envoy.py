"""The KCP gateway: a real Envoy configured like Istio's ingress gateway, fed by files.

:class:`EnvoyGateway` owns one Envoy process and the directory of its bootstrap and
file-based xDS, rendered by :mod:`watcher.render.envoy` from a :class:`GatewaySpec`.
Every change (routes, faults, plain-HTTP destinations, rotated TLS) is swapped in by rename
and confirmed on the admin endpoint (:mod:`.xds_files`); a rejected one is rolled back and
the old configuration keeps serving; nothing restarts Envoy. Faults stop, kill and start
it on the same ports.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import itertools
import json
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import aiohttp

from harness.clusters import ports
from harness.clusters.incarnations import Incarnations
from harness.clusters.process import ProcessRecord, with_log_tail
from harness.kcp.gateway.envoy_admin import EnvoyAdmin, GatewayCounters, gateway_counters
from harness.kcp.gateway.envoy_process import EnvoyCommand, PortTaken, probe_listener, start_envoy
from harness.kcp.gateway.errors import GatewayConfigError, GatewayError
from harness.kcp.gateway.xds_files import XdsFiles, exact
from watcher.pki import write_atomic
from watcher.render.envoy import (
    ClusterSettings,
    EnvoyConfig,
    FaultInjection,
    GatewayListener,
    TlsFiles,
    XdsLayout,
    render_bootstrap,
    render_envoy,
)
from watcher.render.errors import RenderError

_T = TypeVar("_T")


@dataclass(frozen=True)
class GatewaySpec:
    """What the gateway serves besides its ports and directory, as one value: every change
    makes a new one, kept only once Envoy confirmed its configuration (a rejected change
    leaves nothing half-set)."""

    name: str  # the gateway's, for messages
    tls: TlsFiles
    clusters: ClusterSettings
    virtual_services: tuple[Mapping[str, Any], ...] = ()
    resolver: Mapping[str, tuple[str, int]] = field(default_factory=dict)
    fault: FaultInjection | None = None

    def render(self, listener: GatewayListener, layout: XdsLayout) -> EnvoyConfig:
        """Envoy's configuration; :class:`GatewayConfigError` if the routes cannot be made."""
        try:
            return render_envoy(
                list(self.virtual_services),
                resolver=self.resolver,
                gateway=listener,
                layout=layout,
                clusters=self.clusters,
                route_fault=self.fault,
            )
        except RenderError as exc:
            raise GatewayConfigError(
                f"{self.name}: cannot route these VirtualServices: {exc}"
            ) from exc

    def reaching_plaintext(self, destination: str) -> GatewaySpec:
        plaintext = self.clusters.plaintext | {destination}
        return dataclasses.replace(
            self, clusters=dataclasses.replace(self.clusters, plaintext=plaintext)
        )

    def with_new_tls_files(
        self,
        directory: Path,
        generation: int,
        ca_bundle_pem: bytes | None,
        cert_pem: bytes | None,
        key_pem: bytes | None,
    ) -> GatewaySpec:
        """The PEMs served from new files (Envoy reads TLS files only when it builds a
        listener, so the files it serves from are never rewritten)."""
        tls = self.tls
        if ca_bundle_pem is not None:
            write_atomic(directory / f"trusted-ca-{generation}.pem", ca_bundle_pem, mode=0o644)
            tls = dataclasses.replace(tls, ca=str(directory / f"trusted-ca-{generation}.pem"))
        if cert_pem is not None and key_pem is not None:
            write_atomic(directory / f"tls-{generation}.key", key_pem)
            write_atomic(directory / f"tls-{generation}.crt", cert_pem, mode=0o644)
            tls = dataclasses.replace(
                tls,
                cert_chain=str(directory / f"tls-{generation}.crt"),
                private_key=str(directory / f"tls-{generation}.key"),
            )
        return dataclasses.replace(self, tls=tls)


class EnvoyGateway(Incarnations):
    """``async with EnvoyGateway(tls) as gateway:`` — everything answers 404 until
    :meth:`update`; ports (listener, admin) default to free ones (picked again if taken
    before the bind)."""

    error = GatewayError

    def __init__(
        self,
        tls: TlsFiles,
        *,
        envoy: Path | None = None,
        port: int | None = None,
        admin_port: int | None = None,
        name: str = "kcp-gateway",
        log_dir: Path | None = None,
        cluster_settings: ClusterSettings = ClusterSettings(),  # noqa: B008 - frozen
        access_log: bool = False,
        drain_time_s: int = 1,
        concurrency: int | None = None,
        log_level: str = "warning",
        ready_timeout: float = 20.0,
        apply_timeout: float = 5.0,
        stop_timeout: float = 5.0,
        listen_address: str = ports.LOOPBACK,
    ) -> None:
        """``listen_address``: ``0.0.0.0`` when in-cluster webhooks dial this host."""
        self.listen_address = listen_address
        self.name = name
        self._fixed_ports = (port, admin_port)
        self._command = EnvoyCommand(envoy, drain_time_s, concurrency, log_level)
        self._log_dir = log_dir
        self._access_log = access_log
        self.ready_timeout = ready_timeout
        self._apply_timeout = apply_timeout
        self.stop_timeout = stop_timeout
        self._lock = asyncio.Lock()
        self._xds_files: XdsFiles | None = None
        self._tmp: Path | None = None
        self._spec = GatewaySpec(name, tls, cluster_settings)
        self._applied: EnvoyConfig | None = None
        self._tls_generations = itertools.count(1)
        self.records: list[ProcessRecord] = []
        self.last_apply_seconds: float | None = None
        """From the first write of the last confirmed update to its last confirmation."""

    def _started(self, value: _T | None) -> _T:
        if not value:
            raise GatewayError(f"{self.name} has not been started")
        return value

    @property
    def port(self) -> int:
        return self._port(0)

    @property
    def tls(self) -> TlsFiles:
        return self._spec.tls

    @property
    def url(self) -> str:
        return f"https://{ports.LOOPBACK}:{self.port}"

    @property
    def admin_url(self) -> str:
        return f"http://{ports.LOOPBACK}:{self._port(1)}"

    @property
    def record(self) -> ProcessRecord:
        """The current (or last) Envoy run: pid, argv, log path, exit code."""
        return self._started(self.records)[-1]

    @property
    def directory(self) -> Path:
        """The temp dir this gateway owns (bootstrap, xDS files); deleted on exit."""
        return self._started(self._tmp)

    @property
    def config(self) -> EnvoyConfig | None:
        """The configuration Envoy confirmed last."""
        return self._applied

    @property
    def admin(self) -> EnvoyAdmin:
        return EnvoyAdmin(self._started(self._session), self.admin_url)

    @property
    def _xds(self) -> XdsFiles:
        return self._started(self._xds_files)

    async def start(self) -> None:
        """Ready once Envoy serves; a later call restarts it on the same ports and files."""
        if self._session is None:
            self._tmp = Path(tempfile.mkdtemp(prefix=f"{self.name}-"))
            self.stack.callback(shutil.rmtree, self._tmp, ignore_errors=True)
            self.log_path = (self._log_dir or self._tmp) / f"{self.name}.log"
            self._xds_files = XdsFiles(
                name=self.name,
                layout=self._layout(),
                listener=self._gateway_listener,
                admin=lambda: self.admin,
                timeout=self._apply_timeout,
                error=self._error,
            )
        await super().start()

    def _fresh_ports(self) -> tuple[int, int]:
        """The given ports, else free ones; the files that name them are written anew."""
        port, admin_port = self._fixed_ports
        self._ports = (
            port or ports.free_port(self.listen_address),
            admin_port or ports.free_port(),
        )
        self._write_initial_files()
        return self._ports

    def _port_taken(self, exc: Exception) -> bool:
        return isinstance(exc, PortTaken) and not all(self._fixed_ports)

    def _layout(self) -> XdsLayout:
        return XdsLayout(str(self.directory / "xds"))

    def _gateway_listener(self, tls: TlsFiles | None = None) -> GatewayListener:
        access_log = None
        if self._access_log:
            access_log = str((self._log_dir or self.directory) / f"{self.name}-access.log")
        return GatewayListener(
            port=self._port(0),
            tls=tls or self.tls,
            access_log_path=access_log,
            address=self.listen_address,
        )

    def _write_initial_files(self) -> None:
        layout = self._layout()
        Path(layout.directory).mkdir(parents=True, exist_ok=True)
        config = self._render(self._spec)
        self._xds.write_unconfirmed(None, config)
        self._applied = config
        bootstrap = render_bootstrap(layout, admin_port=self._port(1), node_id=self.name)
        write_atomic(self.directory / "bootstrap.json", json.dumps(bootstrap).encode())

    async def _run(self) -> None:
        argv = self._command.argv(self.directory / "bootstrap.json")
        probe = functools.partial(probe_listener, self.admin, self.listen_address, self.port)
        process = self._incarnation(argv, probe, None, poll_interval=0.01)
        self.records.append(process.record)
        await start_envoy(process, self._error)

    async def update(
        self,
        virtual_services: Iterable[Mapping[str, Any]],
        resolver: Mapping[str, tuple[str, int]],
    ) -> EnvoyConfig:
        """Route ``virtual_services``; a destination ``resolver`` lacks answers 503."""
        services, addresses = tuple(virtual_services), dict(resolver)
        return await self._change(
            lambda spec: dataclasses.replace(spec, virtual_services=services, resolver=addresses)
        )

    async def reach_plaintext(self, destination: str) -> EnvoyConfig:
        """Reach ``destination`` over plain HTTP even with mesh mTLS (upstream's listener
        serves plain HTTP behind its sidecar)."""
        return await self._change(lambda spec: spec.reaching_plaintext(destination))

    async def set_fault(self, fault: FaultInjection | None) -> EnvoyConfig:
        """Inject ``fault`` on every route (``None`` removes it); delivered by RDS."""
        return await self._change(lambda spec: dataclasses.replace(spec, fault=fault))

    async def rotate_tls(
        self,
        *,
        ca_bundle_pem: bytes | None = None,
        cert_pem: bytes | None = None,
        key_pem: bytes | None = None,
    ) -> EnvoyConfig:
        """New client CA bundle and/or serving certificate: new files and an LDS swap (new
        connections use them, open ones drain)."""
        if (cert_pem is None) != (key_pem is None):
            raise GatewayError("rotate the serving certificate and its key together")

        return await self._change(
            lambda spec: spec.with_new_tls_files(
                self.directory, next(self._tls_generations), ca_bundle_pem, cert_pem, key_pem
            )
        )

    async def _change(self, change: Callable[[GatewaySpec], GatewaySpec]) -> EnvoyConfig:
        """Apply what ``change`` makes of the spec; keep it only once Envoy confirmed it."""
        async with self._lock:
            spec = change(self._spec)
            config = await self._apply(self._render(spec))
            self._spec = spec
            return config

    def _render(self, spec: GatewaySpec) -> EnvoyConfig:
        return spec.render(self._gateway_listener(spec.tls), self._layout())

    async def _apply(self, config: EnvoyConfig) -> EnvoyConfig:
        previous = self._applied
        if not self.running:
            self._xds.write_unconfirmed(previous, config)
            self._applied = config
            return config
        started = time.perf_counter()
        try:
            await self._xds.swap(previous, config)
        except (aiohttp.ClientError, OSError) as exc:
            raise self._error(
                GatewayError,
                f"{self.name}: admin endpoint {self.admin_url} failed during an update "
                f"(running: {self.running}): {type(exc).__name__}: {exc}",
            ) from exc
        self.last_apply_seconds = time.perf_counter() - started
        self._applied = config
        return config

    def _error(self, kind: type[GatewayError], headline: str) -> GatewayError:
        return kind(with_log_tail(headline, self.log_path, lines=10))

    async def stats(self) -> dict[str, int]:
        """Every counter and gauge (``/stats?format=json``)."""
        return await self.admin.stats()

    async def counters(self) -> GatewayCounters:
        return gateway_counters(await self.stats(), self._gateway_listener())

    async def route_version(self) -> str | None:
        """The RDS ``version_text`` Envoy currently serves."""
        name = self._xds.version_stat(self._layout().rds_file)
        return (await self.admin.text_readouts(f"^{exact(name)}$")).get(name)
