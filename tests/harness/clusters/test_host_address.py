"""The host address: how API servers outside this machine's loopback reach the host-run
webhook (and in-cluster webhooks the gateway). Only the rendering and the selection are
tested here; every e2e run stays on loopback."""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from pathlib import Path

import pytest
from cryptography import x509

from harness.clusters.kind import CommandResult, KindBackend, KindUnavailable, gateway_ipv4
from harness.clusters.selection import (
    BackendOverride,
    BackendSelectionError,
    choose_backend,
)
from harness.environment.hosting import (
    extra_san,
    gateway_listen_address,
    resolve_host_address,
)
from harness.environment.rotation import issue_gateway_certificate
from harness.environment.spec import EnvironmentSpec
from harness.skr.certs import host_sans, issue_webhook_certificate
from harness.skr.objects import bind_address, render_skr_configuration
from harness.skr.webhook import TlsPaths, WebhookConfig, webhook_env
from watcher import pki
from watcher.render.watcher_cr import klm_watcher_dict, parse_watcher


def _sans(issued: pki.Issued) -> tuple[list[str], list[str]]:
    ext = issued.certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    dns = ext.value.get_values_for_type(x509.DNSName)
    ips = [str(ip) for ip in ext.value.get_values_for_type(x509.IPAddress)]
    return dns, ips


def test_default_is_loopback_everywhere() -> None:
    choice = choose_backend("kubeconfig", env={"WATCHER_HARNESS_KUBECONFIG": "/k"})
    assert (choice.host_address, choice.host_bind, choice.webhook_mode) == (None, None, "host")
    assert bind_address("127.0.0.1") == "127.0.0.1"
    assert host_sans(None) == (("localhost",), ("127.0.0.1",))
    assert extra_san("127.0.0.1") is None


def test_environment_sets_the_address_and_the_command_line_wins() -> None:
    env = {
        "WATCHER_HARNESS_HOST_ADDRESS": "10.1.2.3",
        "WATCHER_HARNESS_HOST_BIND": "0.0.0.0",
        "WATCHER_HARNESS_WEBHOOK_MODE": "in-cluster",
    }
    choice = choose_backend("kind", env=env)
    assert (choice.host_address, choice.host_bind, choice.webhook_mode) == (
        "10.1.2.3",
        "0.0.0.0",
        "in-cluster",
    )
    override = BackendOverride(host_address="dev-host.example.com", webhook_mode="host")
    choice = choose_backend("kind", override=override, env=env)
    assert (choice.host_address, choice.webhook_mode) == ("dev-host.example.com", "host")


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"WATCHER_HARNESS_HOST_ADDRESS": "10.0.0.1:8443"}, "without port"),
        ({"WATCHER_HARNESS_HOST_ADDRESS": "https://host"}, "without port"),
        ({"WATCHER_HARNESS_WEBHOOK_MODE": "pod"}, "unknown webhook mode 'pod'"),
        ({"WATCHER_HARNESS_WEBHOOK_MODE": "in-cluster"}, "a local API server runs no pods"),
    ],
)
def test_bad_host_settings_are_refused_with_the_reason(env: dict[str, str], message: str) -> None:
    with pytest.raises(BackendSelectionError, match=message):
        choose_backend("local", env=env)


@pytest.mark.parametrize(
    ("address", "dns", "ips"),
    [
        ("172.18.0.1", [], ["172.18.0.1"]),
        ("dev-host.example.com", ["dev-host.example.com"], []),
    ],
)
def test_non_loopback_address_is_in_the_url_and_the_certificates(
    address: str, dns: list[str], ips: list[str]
) -> None:
    watcher = parse_watcher(klm_watcher_dict())
    ca = pki.create_ca("test-ca")
    vwc = render_skr_configuration(
        [watcher], webhook_port=40123, ca_bundle_pem=ca.cert_pem, host_address=address
    )
    assert vwc is not None
    urls = {w["clientConfig"]["url"] for w in vwc["webhooks"]}
    assert urls == {f"https://{address}:40123/validate/{watcher.manager}"}
    leaf_dns, leaf_ips = _sans(
        issue_webhook_certificate(ca, "runtime-a", "skr-a.example.com", host_address=address)
    )
    gw_dns, gw_ips = _sans(issue_gateway_certificate(ca, extra_san(address)))
    for got_dns, got_ips in ((leaf_dns, leaf_ips), (gw_dns, gw_ips)):
        assert "localhost" in got_dns and "127.0.0.1" in got_ips  # loopback still works
        assert set(dns) <= set(got_dns) and set(ips) <= set(got_ips)
        assert address in got_dns or ipaddress.ip_address(address).exploded in got_ips


def test_the_webhook_binds_the_address_or_every_interface_for_a_name() -> None:
    assert bind_address("172.18.0.1") == "172.18.0.1"
    assert bind_address("dev-host.example.com") == "0.0.0.0"
    pki_dir = Path("/tls")
    tls = TlsPaths(pki_dir)
    env = webhook_env(
        WebhookConfig(kcp_addr="127.0.0.1:1", bind_host="0.0.0.0"),
        tls,
        webhook_port=1,
        metrics_port=2,
        base={},
    )
    assert (env["WEBHOOK_HOST"], env["METRICS_HOST"]) == ("0.0.0.0", "127.0.0.1")
    assert env["CA_CERT"] == str(pki_dir / "ca.crt")


class GatewayRunner:
    def __init__(self, code: int, output: str) -> None:
        self.code, self.output = code, output
        self.commands: list[list[str]] = []

    def which(self, program: str) -> str | None:
        return f"/usr/bin/{program}"

    async def run(self, argv: Sequence[str]) -> CommandResult:
        self.commands.append(list(argv))
        return CommandResult(tuple(argv), self.code, self.output)


async def test_kind_defaults_to_its_network_gateway() -> None:
    runner = GatewayRunner(0, "fc00:f853:ccd:e793::1 172.18.0.1 \n")
    backend = KindBackend(runner=runner)
    assert await backend.host_address() == "172.18.0.1"
    assert runner.commands == [
        [
            "docker", "network", "inspect", "kind",
            "--format", "{{range .IPAM.Config}}{{.Gateway}} {{end}}",
        ]
    ]  # fmt: skip
    spec = EnvironmentSpec(backend=choose_backend("kind", env={}))
    assert await resolve_host_address(spec, backend) == "172.18.0.1"
    explicit = EnvironmentSpec(backend=spec.backend, host_address="10.9.9.9")
    assert await resolve_host_address(explicit, backend) == "10.9.9.9"
    assert gateway_listen_address(spec) == "127.0.0.1"


@pytest.mark.parametrize(
    ("code", "output", "detail"),
    [
        (1, "Error: No such network: kind", "No such network: kind"),
        (0, "fc00::1 \n", "no IPv4 gateway"),
    ],
)
async def test_kind_without_a_gateway_says_what_to_set(code: int, output: str, detail: str) -> None:
    backend = KindBackend(runner=GatewayRunner(code, output))
    with pytest.raises(KindUnavailable) as info:
        await backend.host_address()
    message = str(info.value)
    assert "\n" not in message
    assert detail in message and "WATCHER_HARNESS_HOST_ADDRESS" in message


def test_gateway_ipv4_skips_words_that_are_not_addresses() -> None:
    assert gateway_ipv4("<no value> 10.89.0.1") == "10.89.0.1"
    assert gateway_ipv4("") is None
