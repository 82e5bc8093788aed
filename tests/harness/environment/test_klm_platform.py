"""KLM's deployment config for the watcher, as the harness writes it for any KLM."""

from __future__ import annotations

from harness.environment.klm_platform import (
    CA_SECRET,
    watcher_ca_chain,
    watcher_gateway,
)
from harness.kcp.lifecycle_manager.certificates.policy import CA_ISSUER


def test_the_chain_is_root_then_ca_certificate_then_ca_issuer() -> None:
    root, ca, issuer = watcher_ca_chain("127.0.0.1")
    assert root["spec"] == {"selfSigned": {}}
    assert ca["kind"] == "Certificate"
    assert ca["spec"]["issuerRef"]["name"] == root["metadata"]["name"]
    assert ca["spec"]["isCA"] is True
    assert ca["spec"]["secretName"] == CA_SECRET
    assert ca["spec"]["privateKey"]["size"] == 4096
    assert issuer["metadata"]["name"] == CA_ISSUER == "klm-watcher-selfsigned"
    assert issuer["spec"] == {"ca": {"secretName": CA_SECRET}}
    assert {o["metadata"]["namespace"] for o in (root, ca, issuer)} == {"istio-system"}


def test_the_ca_names_the_address_webhooks_dial() -> None:
    assert watcher_ca_chain("127.0.0.1")[1]["spec"]["ipAddresses"] == ["127.0.0.1"]
    by_name = watcher_ca_chain("gateway.local")[1]["spec"]
    assert by_name["dnsNames"] == ["gateway.local"]
    assert "ipAddresses" not in by_name


def test_the_gateway_has_one_server_with_the_real_host_and_port() -> None:
    gateway = watcher_gateway("127.0.0.1", 31443)
    assert gateway["metadata"] == {
        "name": "klm-watcher",
        "namespace": "kcp-system",
        "labels": {"operator.kyma-project.io/watcher-gateway": "default"},
    }
    (server,) = gateway["spec"]["servers"]
    assert server["hosts"] == ["127.0.0.1"]
    assert server["port"]["number"] == 31443
    assert server["tls"]["credentialName"] == "klm-istio-gateway"
