"""The harness's gateway ↔ listener certificates: who they name, and that they fit together."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from harness.kcp.gateway.mesh import GATEWAY_SPIFFE_ID, GatewayMesh
from watcher.listener import UntrustedProxy


def _load(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def test_gateway_client_certificate_is_on_the_listeners_allow_list(tmp_path: Path) -> None:
    mesh = GatewayMesh.create(tmp_path / "mesh")
    upstream = mesh.upstream_tls()
    gateway = _load(Path(upstream.cert_chain))
    usage = gateway.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usage) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    sans = gateway.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.UniformResourceIdentifier) == [GATEWAY_SPIFFE_ID]
    assert gateway.issuer == mesh.ca.certificate.subject
    assert Path(upstream.ca).read_bytes() == mesh.ca.cert_pem
    assert upstream.server_name is None  # pinned per destination by the renderer
    assert mesh.trusted.check(gateway) == f"uri:{GATEWAY_SPIFFE_ID}"


def test_listener_serving_certificate_names_its_service_and_refuses_other_peers(
    tmp_path: Path,
) -> None:
    mesh = GatewayMesh.create(tmp_path / "mesh")
    config = mesh.listener_config("lifecycle-manager", ("klm-events", "kcp-system"))
    assert (config.xfcc_trust, config.scheme) == ("gateway-mtls", "https")
    serving = _load(tmp_path / "mesh" / "listeners" / "lifecycle-manager" / "tls.crt")
    names = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == [
        "klm-events.kcp-system.svc.cluster.local",
        "klm-events.kcp-system.svc",
        "localhost",
    ]
    with pytest.raises(UntrustedProxy):
        mesh.trusted.check(serving)  # a listener's own certificate is no gateway
