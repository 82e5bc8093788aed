"""Certificate rotation across the KCP gateway and every SKR, without failed deliveries.

The order is cert-manager's zero-downtime order: widen trust first, then swap
certificates, and narrow trust only once nothing uses the old CA any more.

* ``leaf``: re-issue each chosen SKR's runtime certificate from the current CA and wait
  until its webhook serves it (the webhook reloads the files without a restart).
* ``ca``: create a new CA; prepend it to the bundle the gateway trusts for client
  certificates (LDS swap) and to every SKR's ``ca.crt`` and webhook ``caBundle``; re-issue
  every SKR leaf and then the gateway's serving certificate from the new CA. The old CA
  stays trusted until :meth:`CertificateRotation.drop_old_ca`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from harness.errors import HarnessError
from harness.kcp.gateway import EnvoyGateway
from harness.skr.certs import host_sans, issue_webhook_certificate
from harness.skr.fleet import SkrFleet
from harness.skr.install import SkrInstallation
from watcher import pki

RotationKind = Literal["leaf", "ca"]
GATEWAY_DNS_NAMES = ("localhost",)


class RotationError(HarnessError, RuntimeError):
    """A rotation step failed or was asked for in the wrong order."""


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
    """The KCP CA state of one environment and the steps that rotate it."""

    ca: pki.CertificateAuthority
    gateway: EnvoyGateway
    fleet: SkrFleet
    bundle_pem: bytes = b""
    old_cas: list[pki.CertificateAuthority] = field(default_factory=list)
    serve_within: float = 15.0
    gateway_host_address: str | None = None
    """An extra SAN of re-issued gateway certificates (see :func:`issue_gateway_certificate`)."""

    def __post_init__(self) -> None:
        if not self.bundle_pem:
            self.bundle_pem = self.ca.cert_pem

    def _chosen(self, skrs: Sequence[str] | None) -> list[SkrInstallation]:
        if skrs is None:
            return list(self.fleet)
        return [self.fleet[name] for name in skrs]

    async def rotate(self, kind: RotationKind, skrs: Sequence[str] | None = None) -> None:
        """``leaf`` for ``skrs`` (default all), or ``ca`` (always every SKR)."""
        if kind == "leaf":
            await self.rotate_leaves(skrs)
        elif kind == "ca":
            if skrs is not None and sorted(skrs) != sorted(i.cluster.name for i in self.fleet):
                raise RotationError("a CA rotation re-issues every SKR; do not pass skrs")
            await self.rotate_ca()
        else:
            raise RotationError(f"unknown rotation kind {kind!r}; use 'leaf' or 'ca'")

    async def rotate_leaves(self, skrs: Sequence[str] | None = None) -> None:
        """New runtime certificates from the current CA; returns once every one is served."""
        await asyncio.gather(*(self._reissue(inst) for inst in self._chosen(skrs)))

    async def _reissue(self, inst: SkrInstallation) -> None:
        leaf = await asyncio.to_thread(
            issue_webhook_certificate,
            self.ca,
            inst.runtime_id,
            inst.skr_domain,
            inst.certificate,
            host_address=inst.host_address,
        )
        inst.ca = self.ca
        await inst.rotate(self.bundle_pem, leaf)
        await inst.wait_serving(leaf, within=self.serve_within)

    async def _trust(self, bundle: bytes) -> None:
        """Make ``bundle`` the trusted CA bundle at the gateway and in every SKR."""

        async def skr(inst: SkrInstallation) -> None:
            await inst.rotate(bundle, inst.leaf)

        await self.gateway.rotate_tls(ca_bundle_pem=bundle)
        await asyncio.gather(*(skr(inst) for inst in self.fleet))
        self.bundle_pem = bundle

    async def rotate_ca(self) -> None:
        """New CA: widen trust, re-issue SKR leaves, then the gateway's serving certificate."""
        generation = len(self.old_cas) + 2
        new_ca = await asyncio.to_thread(pki.create_ca, common_name=f"kcp-ca-{generation}")
        await self._trust(pki.rotate_ca_bundle(self.bundle_pem, new_ca.cert_pem))
        self.old_cas.append(self.ca)
        self.ca = new_ca
        # A leaf is served only after the webhook reloaded its files, ca.crt included.
        await self.rotate_leaves()
        served = await asyncio.to_thread(
            issue_gateway_certificate, new_ca, self.gateway_host_address
        )
        await self.gateway.rotate_tls(cert_pem=served.cert_pem, key_pem=served.key_pem)

    async def drop_old_ca(self) -> None:
        """Trust only the current CA (after :meth:`rotate_ca`)."""
        if not self.old_cas:
            raise RotationError("no old CA to drop: rotate the CA first")
        await self._trust(self.ca.cert_pem)
        self.old_cas.clear()
