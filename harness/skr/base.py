"""What an SKR installation keeps whichever way its webhook runs.

The runtime's identity, the certificate KLM issued and the CA bundles, the Watchers last
applied, the lock every rewiring takes, and entering/leaving. Shared by the host mode
(:class:`harness.skr.install.SkrInstallation`, a process on this host) and the in-cluster
mode (:class:`harness.skr.in_cluster.InClusterSkrInstallation`, a Deployment in the SKR),
so a new certificate is taken, and a metric read, the same way in both.
"""

from __future__ import annotations

import asyncio
from typing import TypedDict, TypeVar

from harness.aio import Service
from harness.clusters.plane import Cluster
from harness.skr.certs import CertificateOverride, issue_webhook_certificate, serving_ca_bundle
from harness.skr.errors import SkrInstallError
from harness.skr.metrics import value
from watcher import pki
from watcher.render.watcher_cr import Watcher
from watcher.render.webhook_config import FailurePolicy

_Part = TypeVar("_Part")


class _SkrRuntime(TypedDict):
    runtime_id: str
    skr_domain: str
    ca: pki.CertificateAuthority
    ca_bundle_pem: bytes


class SkrRuntime(_SkrRuntime, total=False):
    """What every installation mode is told about its runtime (the keyword arguments of
    :class:`SkrInstallationBase`, which a mode passes on unchanged)."""

    certificate: CertificateOverride
    failure_policy: FailurePolicy
    timeout_seconds: int
    leaf: pki.Issued | None


class SkrInstallationBase(Service):
    """``async with`` installs (:meth:`install`) and uninstalls (:meth:`uninstall`); a mode
    implements :meth:`start`, registering each step's undo on :attr:`stack`."""

    def __init__(
        self,
        cluster: Cluster,
        *,
        runtime_id: str,
        skr_domain: str,
        ca: pki.CertificateAuthority,
        ca_bundle_pem: bytes,
        certificate: CertificateOverride = CertificateOverride(),  # noqa: B008 - frozen
        failure_policy: FailurePolicy = "Ignore",
        timeout_seconds: int = 15,
        leaf: pki.Issued | None = None,
    ) -> None:
        """``leaf``: the certificate KLM issued for this runtime (default: issue one from
        ``ca`` with ``certificate`` applied)."""
        self.cluster = cluster
        self.runtime_id = runtime_id
        self.skr_domain = skr_domain
        self.ca = ca
        self.certificate = certificate
        self.failure_policy: FailurePolicy = failure_policy
        self.timeout_seconds = timeout_seconds
        self._ca_bundle_pem = ca_bundle_pem
        self._serving_bundle_pem = serving_ca_bundle(ca_bundle_pem, certificate)
        self._leaf: pki.Issued | None = leaf
        self._watchers: tuple[Watcher, ...] = ()
        self._lock = asyncio.Lock()
        self._installed = False

    # -- facts ------------------------------------------------------------------------

    @property
    def leaf(self) -> pki.Issued:
        """The runtime certificate the webhook serves and presents to KCP."""
        return self._installed_part(self._leaf)

    def _installed_part(self, part: _Part | None) -> _Part:
        """``part`` of the installation, which :meth:`install` makes (error until then)."""
        if part is None:
            raise SkrInstallError(f"SKR {self.cluster.name}: not installed")
        return part

    @property
    def ca_bundle_pem(self) -> bytes:
        """The KCP CA bundle the webhook trusts (``ca.crt``)."""
        return self._ca_bundle_pem

    @property
    def serving_ca_bundle_pem(self) -> bytes:
        """The ``caBundle`` of the rendered webhooks: what signed the serving certificate."""
        return self._serving_bundle_pem

    @property
    def watchers(self) -> tuple[Watcher, ...]:
        """The Watchers last applied."""
        return self._watchers

    # -- install / uninstall ----------------------------------------------------------

    async def install(self) -> None:
        """Bring the webhook up and wire it (the mode's ``_install``, each step's undo on
        :attr:`stack`); a step that fails undoes those before it."""
        if self._installed:
            raise SkrInstallError(f"SKR {self.cluster.name}: already installed")
        await self.__aenter__()

    async def uninstall(self) -> None:
        """Undo what :meth:`install` did, in reverse."""
        await self.close()

    async def start(self) -> None:
        """Entering installs; once installed, the webhook comes back after a fault."""
        if self._installed:
            await self._start_webhook()
            return
        await self._install()
        self._installed = True

    async def close(self) -> None:
        """Uninstall by unwinding the stack: the webhook configuration goes before the
        webhook. Not :meth:`stop` first — a fault, it would leave the configuration calling
        a webhook that is gone."""
        self._installed = False
        await self._unwind()

    async def _install(self) -> None:
        raise NotImplementedError

    async def _start_webhook(self) -> None:
        raise NotImplementedError

    # -- the certificate --------------------------------------------------------------

    async def _issue_leaf(self, host_address: str | None = None) -> None:
        """Issue the runtime certificate, unless KLM's was given."""
        if self._leaf is None:
            self._leaf = await asyncio.to_thread(
                issue_webhook_certificate,
                self.ca,
                self.runtime_id,
                self.skr_domain,
                self.certificate,
                host_address=host_address,
            )

    def _secret_data(self) -> dict[str, bytes]:
        """``tls.crt``, ``tls.key`` and ``ca.crt`` of the current certificate."""
        return pki.secret_data(self.leaf, self._ca_bundle_pem)

    def _renewed_leaf(self, certificate: tuple[pki.Issued, bytes] | None) -> pki.Issued | None:
        """The certificate KLM issued (with its CA bundle), when it differs from the current
        one; the bundle is taken at once, the leaf when the caller has loaded it."""
        if certificate is None:
            return None
        leaf, bundle = certificate
        if leaf.cert_pem == self.leaf.cert_pem and bundle == self._ca_bundle_pem:
            return None
        self._ca_bundle_pem = bundle
        if self.certificate.ca is None:
            self._serving_bundle_pem = bundle
        return leaf

    # -- metrics ----------------------------------------------------------------------

    async def metrics(self) -> dict[str, float]:
        """The webhook's metrics as ``{name{labels}: value}``."""
        raise NotImplementedError

    async def metric(self, name: str, **labels: str) -> float:
        """One sample (0.0 if absent)."""
        return value(await self.metrics(), name, **labels)
