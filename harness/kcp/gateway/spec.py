"""What the gateway serves, as one value: rendered into Envoy's configuration, changed whole.

Every change to the gateway (routes, a fault, a destination reached over plain HTTP,
rotated TLS files) makes a new :class:`GatewaySpec`; the gateway keeps it only once Envoy
confirmed the configuration rendered from it, so a rejected change leaves nothing half-set.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.kcp.gateway.errors import GatewayConfigError
from watcher.pki import write_atomic
from watcher.render.envoy import (
    ClusterSettings,
    EnvoyConfig,
    FaultInjection,
    GatewayListener,
    TlsFiles,
    XdsLayout,
    render_envoy,
)
from watcher.render.errors import RenderError


@dataclass(frozen=True)
class GatewaySpec:
    """The gateway's configuration inputs besides its ports and directory."""

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
        """The given PEMs written to new files of ``generation`` in ``directory`` and served
        from there (Envoy reads TLS files only when it builds a listener, so the files it
        serves from are never rewritten)."""
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
