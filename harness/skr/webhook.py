"""The SKR webhook as a real ``watcher-webhook`` process that can be killed and restarted.

:func:`webhook_env` (pure) builds the Deployment-style environment KLM renders (reference
§2) for a local process. :class:`WebhookProcess` owns successive incarnations of the
process (one :class:`~harness.clusters.process.OwnedProcess` each) on fixed ports, so the
ValidatingWebhookConfiguration rendered for the first start stays valid after a restart.
Ready = the metrics server's ``/readyz`` answers 200 (it does once the admission server
listens).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import ssl
import sys
from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path

import aiohttp

from harness.clusters import ports, probes
from harness.clusters.incarnations import Incarnations
from harness.clusters.process import Probe, ProcessRecord
from harness.clusters.selection import WebhookIsolation
from harness.skr.errors import WebhookProcessError
from harness.skr.metrics import parse_metrics
from watcher.model import Contract
from watcher.webhook.settings import DeliveryMode


def webhook_executable() -> str:
    """``watcher-webhook`` next to this interpreter (the venv), else from ``PATH``."""
    beside = Path(sys.executable).parent / "watcher-webhook"
    if beside.is_file():
        return str(beside)
    found = shutil.which("watcher-webhook")
    if found is None:
        raise WebhookProcessError(
            "watcher-webhook not found next to the interpreter nor on PATH; "
            "install the project (pip install -e .)"
        )
    return found


@dataclass(frozen=True)
class WebhookConfig:
    """What the SKR webhook is told besides its ports and certificate files."""

    kcp_addr: str  # host:port of the KCP gateway (or listener), no scheme
    contract: Contract = "v2"
    delivery_mode: DeliveryMode = "async"
    log_level: str = "INFO"
    tls_reload_seconds: float = 1.0
    # The durable spool (WATCHER_SPOOL_DIR): the same directory for every incarnation, so a
    # restarted process replays what a killed one queued. None = events in memory only.
    spool_dir: Path | None = None
    extra_env: Mapping[str, str] = field(default_factory=dict)  # WATCHER_* knobs
    # WEBHOOK_HOST: loopback unless API servers elsewhere must reach it (the host address,
    # or 0.0.0.0). The metrics server stays on loopback: only the harness scrapes it.
    bind_host: str = ports.LOOPBACK
    # Bring your own webhook: the argv of any program taking upstream's environment
    # contract, run instead of ``watcher-webhook``. Ready = its admission port completes a
    # TLS handshake and answers HTTP (any status): no /readyz is part of that contract.
    command: tuple[str, ...] = ()
    # ``netns``: the command runs in a network namespace of its own (upstream's binds every
    # interface), bridged by ``harness.skr.isolate``; ``none``: in this host's network.
    isolation: WebhookIsolation = "netns"


@dataclass(frozen=True)
class TlsPaths:
    """The mounted Secret: ``ca.crt``, ``tls.crt``, ``tls.key`` in one directory."""

    directory: Path

    @property
    def ca_cert(self) -> Path:
        return self.directory / "ca.crt"

    @property
    def tls_cert(self) -> Path:
        return self.directory / "tls.crt"

    @property
    def tls_key(self) -> Path:
        return self.directory / "tls.key"


def webhook_env(
    config: WebhookConfig,
    tls: TlsPaths,
    *,
    webhook_port: int,
    metrics_port: int,
    base: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Upstream's contract (:func:`upstream_contract`) plus ours: bind hosts, delivery
    mode, reload interval, spool; ``base`` (default ``os.environ``) provides PATH and the
    like, ``config.extra_env`` wins. A bring-your-own command gets upstream's contract
    (and ``extra_env``) only: none of ours, also none inherited from ``base``."""
    env = dict(os.environ if base is None else base)
    if config.command:
        env = {k: v for k, v in env.items() if not k.startswith("WATCHER_") and k != "KCP_ADDR"}
        env.update(upstream_contract(config, tls, webhook_port, metrics_port))
        env.update(config.extra_env)
        return env
    env.update(upstream_contract(config, tls, webhook_port, metrics_port))
    env.update(
        {
            "WEBHOOK_HOST": config.bind_host,
            "METRICS_HOST": ports.LOOPBACK,
            "WATCHER_DELIVERY_MODE": config.delivery_mode,
            "WATCHER_LOG_LEVEL": config.log_level,
            "WATCHER_TLS_RELOAD_SECONDS": f"{config.tls_reload_seconds:g}",
        }
    )
    if config.spool_dir is not None:
        env["WATCHER_SPOOL_DIR"] = str(config.spool_dir)
    env.update(config.extra_env)
    return env


def upstream_contract(
    config: WebhookConfig, tls: TlsPaths, webhook_port: int, metrics_port: int
) -> dict[str, str]:
    """The environment KLM's Deployment gives upstream's webhook (reference §2)."""
    env = {
        "WEBHOOK_PORT": str(webhook_port),
        "METRICS_PORT": str(metrics_port),
        "CA_CERT": str(tls.ca_cert),
        "TLS_CERT": str(tls.tls_cert),
        "TLS_KEY": str(tls.tls_key),
        "KCP_ADDR": config.kcp_addr,
        "KCP_CONTRACT": config.contract,
    }
    if not config.kcp_addr:  # "" = unset (what does an implementation do without it?)
        del env["KCP_ADDR"]
    return env


@dataclass(eq=False)
class WebhookProcess(Incarnations):
    """``watcher-webhook`` for one SKR: ``start``/``stop``/``kill`` any number of times, on
    the webhook and metrics ports of the first start (ready: ``/readyz`` answers 200).
    ``records`` keeps one :class:`ProcessRecord` per incarnation for reports.
    """

    error = WebhookProcessError
    session_timeout = aiohttp.client.DEFAULT_TIMEOUT

    name: str
    config: WebhookConfig
    tls: TlsPaths
    _: KW_ONLY
    log_path: Path
    ready_timeout: float = 20.0
    stop_timeout: float = 15.0
    records: list[ProcessRecord] = field(default_factory=list, init=False)
    _restarted: asyncio.Event = field(default_factory=asyncio.Event, init=False)
    """Clear while :meth:`restart` runs: a scrape then waits for the new incarnation."""

    def __post_init__(self) -> None:
        self._restarted.set()

    # -- facts ------------------------------------------------------------------------

    @property
    def webhook_port(self) -> int:
        return self._port(0)

    @property
    def metrics_port(self) -> int:
        return self._port(1)

    @property
    def metrics_url(self) -> str:
        return f"http://{ports.LOOPBACK}:{self.metrics_port}"

    # -- lifecycle --------------------------------------------------------------------

    def _fresh_ports(self) -> tuple[int, int]:
        return ports.free_port(self.config.bind_host), ports.free_port()

    async def _run(self) -> None:
        assert self._session is not None
        env = webhook_env(
            self.config, self.tls, webhook_port=self.webhook_port, metrics_port=self.metrics_port
        )
        if self.config.command:
            argv, probe = self._command_argv(), self._admission_probe()
        else:
            argv = [webhook_executable()]
            probe = probes.readyz_probe(self._session, self.metrics_url)
        process = self._incarnation(argv, probe, env)
        self.records.append(process.record)
        await process.start()

    def _command_argv(self) -> list[str]:
        """The bring-your-own command, inside its own network namespace unless isolation
        is off (see :mod:`harness.skr.isolate`)."""
        command = list(self.config.command)
        if self.config.isolation == "none":
            return command
        bind = self.config.bind_host
        argv = [sys.executable, "-m", "harness.skr.isolate"]
        argv += ["--admission", f"{bind}:{self.webhook_port}"]
        argv += ["--metrics", f"{ports.LOOPBACK}:{self.metrics_port}"]
        if self.config.kcp_addr:
            argv += ["--kcp", self.config.kcp_addr]
        return [*argv, "--", *command]

    def _admission_probe(self) -> Probe:
        """Ready when the admission port answers HTTPS at all (its certificate is not checked
        here: the API server does that)."""
        assert self._session is not None
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        url = f"https://{ports.LOOPBACK}:{self.webhook_port}/"
        return probes.http_probe(self._session, url, lambda _s, _b: True, ssl_context=context)

    async def restart(self) -> None:
        """Stop, then start on the same ports (a rotation restarts a bring-your-own webhook
        this way, as KLM restarts upstream's pod); scrapes meanwhile wait for it."""
        self._restarted.clear()
        try:
            await super().restart()
        finally:
            self._restarted.set()

    # -- metrics ----------------------------------------------------------------------

    async def scrape(self) -> dict[str, float]:
        """The current ``/metrics`` as ``{name{labels}: value}``; during a :meth:`restart`,
        of the new incarnation (waited for up to the ready timeout)."""
        if not self._restarted.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.ready_timeout + self.stop_timeout):
                    await self._restarted.wait()
        if self._session is None or not self.running:
            raise WebhookProcessError(f"{self.name} is not running; cannot scrape metrics")
        url = f"{self.metrics_url}/metrics"
        try:
            async with self._session.get(url) as response:
                text = await response.text()
                if response.status != 200:
                    raise WebhookProcessError(f"GET {url}: {response.status} {text[:200]!r}")
        except aiohttp.ClientError as e:
            raise WebhookProcessError(f"GET {url}: {type(e).__name__}: {e}") from e
        return parse_metrics(text)
