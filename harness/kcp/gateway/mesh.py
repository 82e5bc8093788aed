"""Gateway → listener mTLS: the certificates Istio's mesh would provide.

:class:`GatewayMesh` plays istiod's CA with a mesh CA of its own (separate from the
SKR-facing KCP CA, so rotating that one never touches this hop): the gateway's client
certificate (a SPIFFE URI SAN like Istio's) and one serving certificate per listener.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from watcher import pki
from watcher.listener import ListenerConfig, TrustedGateways, gateway_mtls_context
from watcher.render.envoy import UpstreamTls

MESH_CA_NAME = "kcp-mesh-ca"
GATEWAY_IDENTITY = "kcp-gateway"
GATEWAY_SPIFFE_ID = "spiffe://cluster.local/ns/istio-system/sa/kcp-gateway"


def service_hosts(service: str, namespace: str) -> list[str]:
    """The DNS names a Service answers to inside the cluster (fully qualified first)."""
    return [f"{service}.{namespace}.svc.cluster.local", f"{service}.{namespace}.svc"]


@dataclass
class GatewayMesh:
    """The mesh CA and the files of one environment's gateway ↔ listener mTLS."""

    directory: Path
    ca: pki.CertificateAuthority = field(repr=False)
    gateway: pki.Issued = field(repr=False)
    trusted: TrustedGateways = field(
        default_factory=lambda: TrustedGateways.of([f"uri:{GATEWAY_SPIFFE_ID}"])
    )
    """Whose XFCC the listeners believe: the gateway's workload identity."""

    @classmethod
    def create(cls, directory: Path) -> GatewayMesh:
        """A fresh mesh CA and gateway client certificate under ``directory``."""
        directory.mkdir(parents=True, exist_ok=True)
        ca = pki.create_ca(MESH_CA_NAME, key_type="ec")
        gateway = pki.issue(
            ca,
            GATEWAY_IDENTITY,
            uris=[GATEWAY_SPIFFE_ID],
            server_auth=False,
            client_auth=True,
            key_type="ec",
        )
        pki.write_atomic(directory / "ca.crt", ca.cert_pem, mode=0o644)
        (directory / "gateway").mkdir(exist_ok=True)
        pki.write_secret_files(directory / "gateway", pki.secret_data(gateway, ca.cert_pem))
        return cls(directory, ca, gateway)

    @property
    def ca_file(self) -> Path:
        return self.directory / "ca.crt"

    def upstream_tls(self) -> UpstreamTls:
        """What every Envoy cluster to a listener uses (SAN pinned per destination)."""
        files = self.directory / "gateway"
        return UpstreamTls(str(files / "tls.crt"), str(files / "tls.key"), str(self.ca_file))

    def issue_listener(self, component: str, service: tuple[str, str]) -> tuple[Path, Path]:
        """(certificate, key) files for ``component``'s listener behind ``service``, also
        naming loopback for direct probes."""
        name, namespace = service
        leaf = pki.issue_server_certificate(
            self.ca,
            f"{component}-listener",
            dns_names=[*service_hosts(name, namespace), "localhost"],
            ip_addresses=["127.0.0.1"],
            key_type="ec",
        )
        target = self.directory / "listeners" / component
        target.mkdir(parents=True, exist_ok=True)
        files = pki.write_secret_files(target, pki.secret_data(leaf, self.ca.cert_pem))
        return files["tls.crt"], files["tls.key"]

    def listener_config(
        self, component: str, service: tuple[str, str], **settings: Any
    ) -> ListenerConfig:
        """XFCC identity behind the gateway, believed only from the gateway over mTLS."""
        cert, key = self.issue_listener(component, service)
        return ListenerConfig(
            component=component,
            identity="xfcc",
            ssl_context=gateway_mtls_context(cert, key, self.ca_file),
            trusted_gateways=self.trusted,
            **settings,
        )
