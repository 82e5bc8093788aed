"""Certificate faults, carried out the way KLM rotates (klm-reference §3).

The Lifecycle Manager owns the certificates (``harness.kcp.lifecycle_manager.certificates``);
these actions only start what KLM would do and, where a test needs it, wait for the outcome:

* ``leaf``: the chosen Kymas' client certificates are renewed in the KCP (as ``cmctl
  renew`` would) and their Kymas reconciled (trigger ``certificate-renewed``), which copies
  them to the SKRs; returns once every webhook serves its new certificate.
* ``ca``: a new CA enters the gateway's bundle (``caAddedToBundleAt``) and the gateway
  trusts it; returns then. Each Kyma's next reconcile re-issues its certificate; the
  gateway serves the new CA after the grace period (:meth:`CertificateRotation.wait_current`
  waits for both).
* ``drop-old-ca``: the older CAs leave the bundle, as if expired (refused while the
  gateway still serves one of them).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from harness.errors import HarnessError
from harness.kcp.lifecycle_manager.certificates.client import KymaCertificates
from harness.kcp.lifecycle_manager.certificates.gateway_secret import (
    GatewaySecretManager,
    RotationError,
)
from harness.kcp.lifecycle_manager.manager import LifecycleManager
from harness.kcp.lifecycle_manager.queue.workqueue import Trigger
from harness.skr.certs import CertificateOverride, host_sans
from harness.skr.fleet import SkrFleet
from harness.skr.install import SkrInstallation
from watcher import pki
from watcher.domain import KCP_NAMESPACE

GATEWAY_DNS_NAMES = ("localhost",)


def issue_gateway_certificate(
    ca: pki.CertificateAuthority, host_address: str | None = None
) -> pki.Issued:
    """The gateway's serving certificate: ``localhost``/``127.0.0.1``, plus ``host_address``
    (IP or DNS SAN) when in-cluster webhooks dial this host by that address."""
    dns, ips = host_sans(host_address)
    return pki.issue_server_certificate(
        ca,
        "kcp-gateway",
        dns_names=list(dict.fromkeys((*GATEWAY_DNS_NAMES, *dns))),
        ip_addresses=list(ips),
    )


@dataclass
class CertificateRotation:
    """The certificate faults of one environment (see the module doc)."""

    cas: GatewaySecretManager
    certificates: KymaCertificates
    klm: LifecycleManager
    fleet: SkrFleet
    kymas: Mapping[str, str]
    """SKR cluster name → its Kyma's name."""
    overrides: dict[str, CertificateOverride] = field(default_factory=dict)
    """Kyma name → how its certificate is issued broken (shared with the issuer)."""
    serve_within: float = 15.0
    broken: set[str] = field(default_factory=set)
    """Kymas whose certificate :meth:`break_leaves` broke (``rotate_leaves`` repairs them)."""

    @property
    def ca(self) -> pki.CertificateAuthority:
        """The CA issuing client certificates now."""
        return self.cas.issuing_ca

    @property
    def bundle_pem(self) -> bytes:
        """Every CA the gateway trusts, newest first."""
        return self.cas.bundle_pem

    def _chosen(self, skrs: Sequence[str] | None) -> list[SkrInstallation]:
        if skrs is None:
            return list(self.fleet)
        return [self.fleet[name] for name in skrs]

    async def rotate_leaves(self, skrs: Sequence[str] | None = None) -> None:
        """Renew the chosen Kymas' certificates; returns once every webhook serves its new one."""
        chosen = self._chosen(skrs)
        before = {inst.cluster.name: inst.leaf.cert_pem for inst in chosen}
        for inst in chosen:
            kyma = self.kymas[inst.cluster.name]
            if kyma in self.broken:  # a certificate broken by a fault: a correct one now
                self.broken.discard(kyma)
                self.overrides.pop(kyma, None)
                self.certificates.unpin(kyma)
            self.certificates.renew(kyma)
            self.klm.reconciler.enqueue(f"{KCP_NAMESPACE}/{kyma}", Trigger.CERTIFICATE_RENEWED)
        await asyncio.gather(*(self._served(i, before[i.cluster.name]) for i in chosen))

    async def break_leaves(self, skrs: Sequence[str], override: CertificateOverride) -> None:
        """Issue the chosen Kymas' certificates broken by ``override`` and keep them so
        (pinned) until :meth:`rotate_leaves`; returns once every webhook serves its own."""
        chosen = self._chosen(skrs)
        before = {inst.cluster.name: inst.leaf.cert_pem for inst in chosen}
        for inst in chosen:
            kyma = self.kymas[inst.cluster.name]
            self.overrides[kyma] = override
            self.broken.add(kyma)
            self.certificates.pin(kyma)
            self.certificates.renew(kyma)
            self.klm.reconciler.enqueue(f"{KCP_NAMESPACE}/{kyma}", Trigger.CERTIFICATE_RENEWED)
        await asyncio.gather(*(self._served(i, before[i.cluster.name]) for i in chosen))

    def keep_leaves(self, skrs: Sequence[str]) -> None:
        """KLM stops renewing the chosen Kymas' certificates until :meth:`rotate_leaves`
        (as when it cannot reach their SKRs); their CA bundle still follows."""
        for inst in self._chosen(skrs):
            kyma = self.kymas[inst.cluster.name]
            self.broken.add(kyma)
            self.certificates.pin(kyma)

    async def _served(self, inst: SkrInstallation, old_pem: bytes | None) -> None:
        """Until the installation took a certificate other than ``old_pem`` and serves it."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.serve_within
        while inst.leaf.cert_pem == old_pem:
            if loop.time() > deadline:
                kyma = self.kymas[inst.cluster.name]
                raise HarnessError(
                    f"SKR {inst.cluster.name}: no new certificate within "
                    f"{self.serve_within:g} s; was Kyma {kyma} reconciled? "
                    "(a Kyma that does not exist is never reconciled)"
                )
            await asyncio.sleep(0.05)  # set by the Kyma reconcile
        await inst.wait_serving(inst.leaf, within=max(deadline - loop.time(), 1.0))

    def current(self) -> list[str]:
        """What still uses an older CA than the issuing one (empty: the rotation is done)."""
        issuing = self.ca.certificate.subject
        waiting = [
            f"SKR {inst.cluster.name} ({inst.leaf.certificate.issuer.rfc4514_string()})"
            for inst in self.fleet
            if inst.leaf.certificate.issuer != issuing
            and inst.cluster.name in self.kymas
            and self.kymas[inst.cluster.name] not in self.certificates.pinned
        ]
        if self.cas.serving_ca is not self.ca:
            waiting.append(f"the gateway (serves {self.cas.serving_ca.common_name})")
        return waiting

    async def wait_current(self, within: float = 60.0) -> None:
        """Until every SKR serves a certificate of the issuing CA and the gateway serves
        that CA too (after the grace period)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        while waiting := self.current():
            if loop.time() > deadline:
                raise HarnessError(
                    f"the CA rotation is not done after {within:g} s: {', '.join(waiting)} "
                    "still on an older CA (certificates are re-issued in each Kyma's next "
                    "reconcile; the gateway switches after the grace period)"
                )
            await asyncio.sleep(0.1)
        for inst in self.fleet:
            await inst.wait_serving(inst.leaf, within=max(deadline - loop.time(), 1.0))


__all__ = ["CertificateRotation", "RotationError", "issue_gateway_certificate"]
