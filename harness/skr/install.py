"""What KLM installs into one SKR, for a local cluster: certificate, Secret, webhook, VWC.

:class:`SkrInstallation` runs ``watcher-webhook`` as a real process on this host, its
"mounted Secret" a directory it owns and its durable spool there (it outlives a killed
webhook, so the restarted one replays what the killed one had queued); ``skr-webhook``
gets a URL clientConfig, as envtest wires webhooks. Leaving undoes every step in reverse,
also when entering failed half-way, but leaves ``kyma-system``: a local cluster has no
namespace controller, so a deleted namespace would stay ``Terminating`` forever.
"""

from __future__ import annotations

import asyncio
import dataclasses
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Unpack

from harness.clusters import ports
from harness.clusters.plane import Cluster
from harness.clusters.process import ProcessRecord
from harness.clusters.selection import WebhookIsolation
from harness.matching.objects import match_object
from harness.skr import serving
from harness.skr.base import SkrInstallationBase, SkrRuntime
from harness.skr.objects import (
    NAMESPACE,
    SECRET_NAME,
    SkrObjects,
    bind_address,
    delivery_is_async,
    render_skr_configuration,
    secret_manifest,
)
from harness.skr.webhook import TlsPaths, WebhookConfig, WebhookProcess
from watcher import pki
from watcher.model import Contract
from watcher.render.watcher_cr import Watcher
from watcher.render.webhook_config import CONFIGURATION_NAME
from watcher.webhook.settings import DeliveryMode


class SkrInstallation(SkrInstallationBase):
    """The watcher in one SKR: ``async with SkrInstallation(cluster, ...) as skr:``."""

    def __init__(
        self,
        cluster: Cluster,
        *,
        kcp_addr: str,
        contract: Contract = "v2",
        delivery_mode: DeliveryMode = "async",
        log_level: str = "INFO",
        extra_env: dict[str, str] | None = None,
        log_dir: Path | None = None,
        ready_timeout: float = 20.0,
        spool: bool = True,
        host_address: str = ports.LOOPBACK,
        bind_host: str | None = None,
        command: Sequence[str] = (),
        isolation: WebhookIsolation = "netns",
        attached: bool = True,
        **runtime: Unpack[SkrRuntime],
    ) -> None:
        """``attached``: a Kyma's reconcile owns this watcher (``False``: the Secret and
        ``skr-webhook`` reach the SKR only with the first :meth:`repair`, as KLM installs the
        Runtime Watcher per Kyma); ``log_dir`` keeps the webhook log after uninstall;
        ``extra_env`` wins over everything (``WATCHER_SPOOL_DIR=""`` turns the spool off);
        ``host_address``: how the API server reaches this host (url clientConfig and a
        SAN); ``bind_host``: default :func:`bind_address`; ``command``: bring your own
        webhook (see :class:`WebhookConfig`)."""
        super().__init__(cluster, **runtime)
        self.host_address = host_address
        self._config = WebhookConfig(
            bind_host=bind_host or bind_address(host_address),
            kcp_addr=kcp_addr,
            contract=contract,
            delivery_mode=delivery_mode,
            log_level=log_level,
            extra_env=dict(extra_env or {}),
            command=tuple(command),
            isolation=isolation,
        )
        self._log_dir = log_dir
        self._ready_timeout = ready_timeout
        self._spool = spool
        self._directory: Path | None = None
        self._webhook: WebhookProcess | None = None
        self._objects: SkrObjects | None = None
        self._vwc_applied = False
        self._attached = attached

    # -- facts ------------------------------------------------------------------------

    @property
    def directory(self) -> Path:
        """The owned directory holding ``tls.crt``, ``tls.key``, ``ca.crt`` (and the log)."""
        return self._installed_part(self._directory)

    @property
    def tls(self) -> TlsPaths:
        return TlsPaths(self.directory / "tls")

    @property
    def webhook(self) -> WebhookProcess:
        return self._installed_part(self._webhook)

    @property
    def webhook_port(self) -> int:
        return self.webhook.webhook_port

    @property
    def webhook_url(self) -> str:
        return f"https://{self.host_address}:{self.webhook_port}"

    @property
    def running(self) -> bool:
        """The webhook is up (a process here; pods for the in-cluster mode)."""
        return self._webhook is not None and self._webhook.running

    @property
    def process_records(self) -> tuple[ProcessRecord, ...]:
        """Every webhook incarnation on this host (none for the in-cluster mode)."""
        return tuple(self._webhook.records) if self._webhook is not None else ()

    @property
    def state(self) -> str:
        """One phrase for reports: ``pid N`` or ``down``."""
        return f"pid {self.pid}" if self.running else "down"

    @property
    def metrics_url(self) -> str:
        return self.webhook.metrics_url

    @property
    def pid(self) -> int | None:
        return self.webhook.pid

    @property
    def _skr(self) -> SkrObjects:
        return self._installed_part(self._objects)

    # -- install / uninstall ----------------------------------------------------------

    async def _install(self) -> None:
        """Certificate → files → namespace and Secret → webhook process."""
        stack = self.stack
        stack.callback(setattr, self, "_objects", None)
        directory = Path(tempfile.mkdtemp(prefix=f"skr-{self.cluster.name}-"))
        stack.callback(shutil.rmtree, directory, ignore_errors=True)
        self._directory = directory
        self.tls.directory.mkdir(mode=0o700)
        await self._issue_leaf(host_address=self.host_address)
        pki.write_secret_files(self.tls.directory, self._secret_data())
        api = await stack.enter_async_context(self.cluster.api_client())
        self._objects = SkrObjects(api, self.cluster.name)
        await self._skr.ensure_namespace()
        stack.push_async_callback(self._skr.delete_secret)
        if self._attached:  # else the Kyma's first reconcile puts it (repair)
            await self._skr.put_secret(self._secret_data())
        log_dir = self._log_dir or directory
        config = self._config
        if self._spool and delivery_is_async(config) and not config.command:
            config = dataclasses.replace(config, spool_dir=directory / "spool")
        self._webhook = await stack.enter_async_context(
            WebhookProcess(
                f"watcher-webhook[{self.cluster.name}]",
                config,
                self.tls,
                log_path=log_dir / f"watcher-webhook-{self.cluster.name}.log",
                ready_timeout=self._ready_timeout,
            )
        )
        stack.push_async_callback(self._delete_configuration)

    # -- Kubernetes objects -----------------------------------------------------------

    async def _delete_configuration(self) -> None:
        await self._skr.delete_configuration()
        self._vwc_applied = False

    async def _put_configuration(self, body: dict[str, Any]) -> None:
        await self._skr.put_configuration(body)
        self._vwc_applied = True

    def render(self, watchers: Sequence[Watcher]) -> dict[str, Any] | None:
        """The configuration :meth:`apply_watchers` would store (None: none/deleted)."""
        return render_skr_configuration(
            watchers,
            webhook_port=self.webhook_port,
            ca_bundle_pem=self._serving_bundle_pem,
            failure_policy=self.failure_policy,
            timeout_seconds=self.timeout_seconds,
            host_address=self.host_address,
        )

    async def apply_watchers(self, watchers: Sequence[Watcher]) -> None:
        """Render ``skr-webhook`` from ALL ``watchers`` and create or replace it in the SKR;
        delete it when there are none. Concurrent calls are applied one after another.
        :attr:`watchers` changes first, so whoever probes the new configuration waits for it
        rather than probing the old one."""
        async with self._lock:
            self._watchers = tuple(watchers)
            body = self.render(watchers)
            if not self._attached:  # no Kyma owns this SKR's watcher: its reconcile will
                self._vwc_applied = body is not None  # render the newest set then
                return
            if body is None:
                await self._delete_configuration()
            else:
                await self._put_configuration(body)

    async def repair(
        self,
        watchers: Callable[[], Sequence[Watcher]] | None = None,
        certificate: tuple[pki.Issued, bytes] | None = None,
    ) -> tuple[str, ...]:
        """What KLM's Kyma reconcile does to this SKR's watcher: take ``certificate`` (the
        KCP's ``<kyma>-webhook-tls`` and the CA bundle) when it differs — the webhook
        reloads its files, as a mounted Secret updates in a pod —, render ``skr-webhook``
        from ``watchers`` (None: as last applied), and put back the Secret and the
        configuration when lost or altered. Writes only what differs, the configuration
        (whose ``caBundle`` must trust a new serving certificate) before the files.
        Returns what it changed."""
        async with self._lock:
            self._attached = True
            changed = []
            new_leaf = self._renewed_leaf(certificate)
            if new_leaf is not None:
                changed.append(f"certificate ({new_leaf.certificate.issuer.rfc4514_string()})")
            if watchers is not None:  # read under the lock: the newest set wins
                self._watchers = tuple(watchers())
                self._vwc_applied = True
            current, secret = await self._skr.stored()
            changed += await self._repair_configuration(current)
            if new_leaf is not None:
                changed += await self._load_leaf(new_leaf)
            if secret is None or secret.get("data") != secret_manifest(self._secret_data())["data"]:
                await self._skr.put_secret(self._secret_data())
                changed.append(f"Secret {NAMESPACE}/{SECRET_NAME}")
            return tuple(changed)

    async def _repair_configuration(self, current: dict[str, Any] | None) -> list[str]:
        """``skr-webhook`` as rendered now, put back when lost or altered."""
        wanted = self.render(self._watchers) if self._vwc_applied else None
        if wanted is None:
            if current is None or not self._vwc_applied:
                return []
            await self._delete_configuration()
            return [f"ValidatingWebhookConfiguration {CONFIGURATION_NAME} deleted"]
        if current is not None and match_object({"webhooks": wanted["webhooks"]}, current).ok:
            return []
        await self._put_configuration(wanted)
        return [f"ValidatingWebhookConfiguration {CONFIGURATION_NAME}"]

    async def _load_leaf(self, leaf: pki.Issued) -> list[str]:
        """The webhook's files hold ``leaf`` (ours reloads them; a command is restarted)."""
        data = pki.secret_data(leaf, self._ca_bundle_pem)
        await asyncio.to_thread(pki.write_secret_files, self.tls.directory, data)
        self._leaf = leaf
        if not (self._config.command and self.running):
            return []
        # Upstream's webhook reads its serving certificate once at start; KLM restarts the
        # pod (label pod-restart-trigger). Ours reloads files.
        await self.webhook.restart()
        return ["webhook restarted"]

    async def remove(self) -> None:
        """Delete ``skr-webhook`` and the Secret from the SKR (the Kyma is gone); the
        webhook process stays, and :meth:`repair` puts both back."""
        async with self._lock:
            self._attached = False
            await self._delete_configuration()
            await self._skr.delete_secret()

    # -- rotation ---------------------------------------------------------------------

    async def rotate(self, new_ca_bundle_pem: bytes, new_leaf: pki.Issued) -> None:
        """Zero-downtime rotation: widen trust first, then swap the certificate — what
        :meth:`repair` does with a new ``certificate`` (configuration ``caBundle``, then
        the files the webhook reloads without restart, then the Secret).
        ``new_ca_bundle_pem`` should still hold the old CA (see ``pki.rotate_ca_bundle``)
        for in-flight connections."""
        await self.repair(certificate=(new_leaf, new_ca_bundle_pem))

    async def served_certificate(self) -> bytes:
        """The DER certificate the webhook presents right now (one TLS handshake)."""
        bound = self._config.bind_host
        name, bundle = self.cluster.name, self._serving_bundle_pem
        return await serving.served_certificate(name, bound, self.webhook_port, bundle)

    async def wait_serving(self, leaf: pki.Issued, *, within: float = 10.0) -> float:
        """Poll until the webhook serves ``leaf`` (after :meth:`rotate`); seconds it took."""
        return await serving.wait_serving(
            self.cluster.name,
            self._config.bind_host,
            self.webhook_port,
            self._serving_bundle_pem,
            leaf,
            within=within,
            log_path=self.webhook.log_path,
        )

    # -- fault injection and metrics --------------------------------------------------

    async def stop(self) -> int | None:
        """Stop the webhook gracefully (SIGTERM, drain); the VWC stays."""
        return await self.webhook.stop()

    async def _start_webhook(self) -> None:
        """Start the webhook again on the same ports."""
        await self.webhook.start()

    async def kill(self) -> int | None:
        """SIGKILL the webhook (its process group); the VWC stays."""
        return await self.webhook.kill()

    async def restart(self) -> None:
        """Stop gracefully, then start again on the same ports."""
        await self.webhook.restart()

    async def metrics(self) -> dict[str, float]:
        return await self.webhook.scrape()
