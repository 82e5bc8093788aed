"""Only the gateway may hand the listener an XFCC header: gateway mTLS plus an allow-list.

Real TLS on loopback with certificates from ``watcher.pki``: a forger without a client
certificate, a workload with a certificate from the gateway CA but not on the allow-list,
a certificate from a foreign CA, and the gateway itself.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from listener_testing import BODY, COMPONENT, XFCC, make_cert, next_event, rejected, running
from test_listener_cli import COMMAND, DEADLINE, cli, stop

from watcher import pki
from watcher.errors import ConfigError
from watcher.listener import (
    XFCC_HEADER,
    ListenerConfig,
    TrustedGateways,
    UntrustedProxy,
    format_xfcc,
    gateway_mtls_context,
    server_context,
)

pytestmark = pytest.mark.usefixtures("no_leaked_tasks")

GATEWAY_URI = "spiffe://cluster.local/ns/istio-system/sa/kcp-gateway"
FORGED = {XFCC_HEADER: format_xfcc(make_cert("tenant-victim", dns=["victim.example.com"]))}


@dataclass(frozen=True)
class Mesh:
    """Gateway CA, the listener's serving files and client certificates to try."""

    ca_file: Path
    server_cert: Path
    server_key: Path
    clients: dict[str, Path]  # name → key+certificate chain file


@pytest.fixture(scope="module")
def mesh(tmp_path_factory: pytest.TempPathFactory) -> Mesh:
    directory = tmp_path_factory.mktemp("mesh")
    ca, foreign = (
        pki.create_ca("kcp-mesh-ca", key_type="ec"),
        pki.create_ca("foreign", key_type="ec"),
    )
    server = pki.issue_server_certificate(ca, "klm-listener", key_type="ec")
    issued = {
        "gateway": pki.issue(ca, "kcp-gateway", uris=[GATEWAY_URI], key_type="ec"),
        "workload": pki.issue(ca, "other-workload", dns_names=["other.kcp"], key_type="ec"),
        "foreign-gateway": pki.issue(foreign, "kcp-gateway", key_type="ec"),
    }
    (directory / "ca.crt").write_bytes(ca.cert_pem)
    (directory / "tls.crt").write_bytes(server.cert_pem)
    (directory / "tls.key").write_bytes(server.key_pem)
    clients = {}
    for name, leaf in issued.items():
        clients[name] = directory / f"{name}.pem"
        clients[name].write_bytes(leaf.key_pem + leaf.cert_pem)
    return Mesh(directory / "ca.crt", directory / "tls.crt", directory / "tls.key", clients)


def client(mesh: Mesh, name: str | None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(mesh.ca_file))
    if name is not None:
        context.load_cert_chain(mesh.clients[name])
    return context


def gateway_listener(mesh: Mesh, *allowed: str) -> Any:
    return running(
        ssl_context=gateway_mtls_context(mesh.server_cert, mesh.server_key, mesh.ca_file),
        trusted_gateways=TrustedGateways.of(allowed or ("kcp-gateway",)),
    )


async def post(
    session: aiohttp.ClientSession, url: str, context: ssl.SSLContext, headers: dict[str, str]
) -> tuple[int, dict[str, Any]]:
    async with session.post(url, data=BODY, headers=headers, ssl=context) as response:
        return response.status, await response.json()


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as s:
        yield s


# --------------------------------------------------------------------------------------
# Over real TLS


async def test_forged_xfcc_without_a_client_certificate_fails_the_handshake(
    mesh: Mesh, session: aiohttp.ClientSession
) -> None:
    async with gateway_listener(mesh) as listener:
        assert listener.event_url.startswith("https://")
        with pytest.raises(aiohttp.ClientError):
            await post(session, listener.event_url, client(mesh, None), FORGED)
        assert listener.metrics.value("watcher_listener_events_accepted_total") == 0
        assert listener.metrics.value("watcher_listener_requests_total", {"code": "200"}) == 0


async def test_a_certificate_from_a_foreign_ca_fails_the_handshake(
    mesh: Mesh, session: aiohttp.ClientSession
) -> None:
    async with gateway_listener(mesh) as listener:
        with pytest.raises(aiohttp.ClientError):
            await post(session, listener.event_url, client(mesh, "foreign-gateway"), FORGED)
        assert listener.metrics.value("watcher_listener_events_accepted_total") == 0


async def test_a_mesh_certificate_not_on_the_allow_list_gets_403_untrusted_proxy(
    mesh: Mesh, session: aiohttp.ClientSession
) -> None:
    async with gateway_listener(mesh) as listener:
        status, payload = await post(session, listener.event_url, client(mesh, "workload"), FORGED)
        assert status == 403
        assert payload["error"] == "untrusted proxy"
        assert "other-workload" in payload["reason"] and "kcp-gateway" in payload["reason"]
        assert rejected(listener, "untrusted-proxy") == 1
        # Not even a malformed request gets further than the proxy check.
        status, _ = await post(
            session, listener.event_url, client(mesh, "workload"), {XFCC_HEADER: "garbage"}
        )
        assert status == 403
        assert rejected(listener, "untrusted-proxy") == 2
        assert rejected(listener, "invalid-client-cert") == 0
        assert listener.metrics.value("watcher_listener_events_accepted_total") == 0


async def test_the_gateway_is_believed_and_the_runtime_id_comes_from_its_xfcc(
    mesh: Mesh, session: aiohttp.ClientSession
) -> None:
    async with gateway_listener(mesh) as listener:
        status, payload = await post(session, listener.event_url, client(mesh, "gateway"), XFCC)
        assert (status, payload["runtime_id"]) == (200, "runtime-a")
        event = await next_event(listener)
        assert event.runtime_id == "runtime-a"
        assert rejected(listener, "untrusted-proxy") == 0
        # The gateway's own certificate is never an identity: no XFCC → 401.
        status, payload = await post(session, listener.event_url, client(mesh, "gateway"), {})
        assert status == 401
        assert rejected(listener, "invalid-client-cert") == 1


async def test_allow_list_by_uri_san_and_the_cn_no_longer_suffices(
    mesh: Mesh, session: aiohttp.ClientSession
) -> None:
    async with gateway_listener(mesh, f"uri:{GATEWAY_URI}") as listener:
        status, _ = await post(session, listener.event_url, client(mesh, "gateway"), XFCC)
        assert status == 200
        await next_event(listener)
    async with gateway_listener(mesh, "cn:someone-else", "dns:kcp-gateway") as listener:
        status, payload = await post(session, listener.event_url, client(mesh, "gateway"), XFCC)
        assert status == 403 and payload["error"] == "untrusted proxy"


async def test_plain_http_opt_out_still_believes_anyone(session: aiohttp.ClientSession) -> None:
    """The documented opt-out: no gateway mTLS, so a forged XFCC is believed (and the
    listener says so in its config)."""
    async with running() as listener:
        assert listener.config.xfcc_trust == "any-client"
        async with session.post(listener.event_url, data=BODY, headers=FORGED) as response:
            assert response.status == 200
        assert (await next_event(listener)).runtime_id == "tenant-victim"


# --------------------------------------------------------------------------------------
# The allow-list and the configuration rules


def test_allow_list_entries() -> None:
    gateway = make_cert("kcp-gateway", dns=["gw.kcp"], uris=[GATEWAY_URI])
    assert TrustedGateways.of(["kcp-gateway"]).check(gateway) == "kcp-gateway"
    assert TrustedGateways.of(["gw.kcp"]).check(gateway) == "gw.kcp"
    assert TrustedGateways.of(["nope", "CN:kcp-gateway"]).check(gateway) == "CN:kcp-gateway"
    assert TrustedGateways.of([f"uri:{GATEWAY_URI}"]).check(gateway) == f"uri:{GATEWAY_URI}"
    for entry in ("dns:kcp-gateway", "uri:kcp-gateway", "cn:gw.kcp", "kcp-gatewa"):
        with pytest.raises(UntrustedProxy, match="not a trusted gateway"):
            TrustedGateways.of([entry]).check(gateway)
    with pytest.raises(UntrustedProxy, match="no names"):
        TrustedGateways.of(["kcp-gateway"]).check(make_cert(None))
    for bad in ([], ["cn:"], ["  "]):
        with pytest.raises(ConfigError):
            TrustedGateways.of(bad)


def test_configuration_refuses_half_set_up_gateway_trust(mesh: Mesh) -> None:
    mtls = gateway_mtls_context(mesh.server_cert, mesh.server_key, mesh.ca_file)
    trusted = TrustedGateways.of(["kcp-gateway"])
    with pytest.raises(ConfigError, match="needs an ssl_context that requires client"):
        ListenerConfig(component=COMPONENT, trusted_gateways=trusted)
    with pytest.raises(ConfigError, match="needs an ssl_context that requires client"):
        ListenerConfig(
            component=COMPONENT,
            trusted_gateways=trusted,
            ssl_context=server_context(mesh.server_cert, mesh.server_key),
        )
    with pytest.raises(ConfigError, match="needs trusted_gateways"):
        ListenerConfig(component=COMPONENT, ssl_context=mtls)
    with pytest.raises(ConfigError, match="ignores XFCC"):
        ListenerConfig(
            component=COMPONENT, identity="direct-mtls", ssl_context=mtls, trusted_gateways=trusted
        )
    config = ListenerConfig(component=COMPONENT, ssl_context=mtls, trusted_gateways=trusted)
    assert (config.xfcc_trust, config.scheme) == ("gateway-mtls", "https")
    direct = ListenerConfig(component=COMPONENT, identity="direct-mtls", ssl_context=mtls)
    assert direct.xfcc_trust is None


# --------------------------------------------------------------------------------------
# The CLI


async def test_cli_with_gateway_ca_believes_only_the_gateway(mesh: Mesh) -> None:
    args = [
        *("--component", COMPONENT, "--tls-cert", str(mesh.server_cert)),
        *("--tls-key", str(mesh.server_key), "--gateway-ca", str(mesh.ca_file)),
        *("--trusted-gateway", f"uri:{GATEWAY_URI}"),
    ]
    async with cli(*args) as (process, url), aiohttp.ClientSession() as session:
        event_url = f"{url}/v2/{COMPONENT}/event"
        with pytest.raises(aiohttp.ClientError):
            await post(session, event_url, client(mesh, None), FORGED)
        status, payload = await post(session, event_url, client(mesh, "workload"), FORGED)
        assert (status, payload["error"]) == (403, "untrusted proxy")
        status, _ = await post(session, event_url, client(mesh, "gateway"), XFCC)
        assert status == 200
        assert process.stdout is not None
        line = await asyncio.wait_for(process.stdout.readline(), DEADLINE)
        assert json.loads(line)["runtime_id"] == "runtime-a"
        code, _ = await stop(process)
    assert code == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--component", "lm"], "XFCC mode needs --gateway-ca"),
        (["--component", "lm", "--gateway-ca", "ca.crt"], "--gateway-ca needs --tls-cert"),
        (["--component", "lm", "--trusted-gateway", "gw"], "--trusted-gateway needs --gateway-ca"),
        (
            ["--component", "lm", "--gateway-ca", "c", "--insecure-trust-any-xfcc"],
            "exclude each other",
        ),
        (
            [
                *("--component", "lm", "--direct-mtls", "--tls-cert", "a", "--tls-key", "b"),
                *("--ca-cert", "c", "--insecure-trust-any-xfcc"),
            ],
            "--direct-mtls ignores XFCC",
        ),
    ],
)
async def test_cli_gateway_trust_usage_errors(args: list[str], message: str) -> None:
    process = await asyncio.create_subprocess_exec(
        *COMMAND, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    async with asyncio.timeout(DEADLINE):
        _, stderr = await process.communicate()
    assert process.returncode == 2
    [line] = stderr.decode().splitlines()
    assert message in line
