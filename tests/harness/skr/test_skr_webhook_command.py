"""Bring your own webhook: any command taking upstream's environment contract, run in a
network namespace of its own and reached only through ``harness.skr.isolate``.

The second implementation here is ours, started as an external command in its
upstream-like sync mode (``env WATCHER_DELIVERY_MODE=sync watcher-webhook``): it binds
``0.0.0.0`` as upstream's does, and this host's network must not see that.
"""

from __future__ import annotations

import asyncio
import os
import ssl
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from harness.clusters import procfs
from harness.conformance.webhook_cases import configmap, review
from harness.skr import isolate
from harness.skr.certs import issue_webhook_certificate
from harness.skr.metrics import value
from harness.skr.webhook import TlsPaths, WebhookConfig, WebhookProcess, webhook_env
from watcher import pki
from watcher.listener import Listener, ListenerConfig, ListenerEvent, direct_mtls_context

OURS_AS_A_COMMAND = (
    "env",
    "WATCHER_DELIVERY_MODE=sync",
    str(Path(sys.executable).parent / "watcher-webhook"),
)
REVIEW = review("u-1", "CREATE", configmap("a"))  # ConfigMap default/demo


def test_a_command_gets_upstreams_contract_and_none_of_our_settings(tmp_path: Path) -> None:
    config = WebhookConfig(
        kcp_addr="127.0.0.1:9443", command=("my-webhook",), extra_env={"EXTRA": "1"}
    )
    base = {"PATH": "/bin", "WATCHER_SPOOL_DIR": "/inherited", "HOME": "/root"}
    env = webhook_env(config, TlsPaths(tmp_path), webhook_port=1, metrics_port=2, base=base)
    assert env == {
        "PATH": "/bin",
        "HOME": "/root",
        "WEBHOOK_PORT": "1",
        "METRICS_PORT": "2",
        "CA_CERT": str(tmp_path / "ca.crt"),
        "TLS_CERT": str(tmp_path / "tls.crt"),
        "TLS_KEY": str(tmp_path / "tls.key"),
        "KCP_ADDR": "127.0.0.1:9443",
        "KCP_CONTRACT": "v2",
        "EXTRA": "1",
    }


@pytest.fixture
def tls(tmp_path: Path) -> TlsPaths:
    ca = pki.create_ca(key_type="ec")
    leaf = issue_webhook_certificate(ca, "runtime-byo", "byo.example.com")
    for name in ("skr", "kcp"):
        (tmp_path / name).mkdir()
    pki.write_secret_files(tmp_path / "skr", pki.secret_data(leaf, ca.cert_pem))
    kcp = pki.issue_server_certificate(ca, "kcp-gateway", key_type="ec")
    pki.write_secret_files(tmp_path / "kcp", pki.secret_data(kcp, ca.cert_pem))
    return TlsPaths(tmp_path / "skr")


@pytest.fixture
async def kcp(tls: TlsPaths) -> AsyncIterator[Listener]:
    """The KCP side: our listener taking the runtime id from the client certificate."""
    kcp_dir = tls.directory.parent / "kcp"
    context = direct_mtls_context(kcp_dir / "tls.crt", kcp_dir / "tls.key", kcp_dir / "ca.crt")
    config = ListenerConfig(
        component="lifecycle-manager", ssl_context=context, identity="direct-mtls"
    )
    async with Listener(config) as listener:
        yield listener


def _listening(port: int) -> set[str]:
    """Local addresses listening on ``port`` in this process's network (IPv4, hex)."""
    found = set()
    for line in Path("/proc/self/net/tcp").read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        address, _, hex_port = local.partition(":")
        if state == "0A" and int(hex_port, 16) == port:
            found.add(address)
    return found


async def _admit(tls: TlsPaths, port: int) -> str:
    context = ssl.create_default_context(cafile=str(tls.ca_cert))
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            f"https://127.0.0.1:{port}/validate/lifecycle-manager", json=REVIEW, ssl=context
        ) as answer,
    ):
        assert answer.status == 200
        body = await answer.json()
    return str(body["response"]["status"]["message"])


async def _next_event(listener: Listener) -> ListenerEvent:
    async with asyncio.timeout(10):
        async for event in listener.events():
            return event
    raise AssertionError("the listener's stream ended")


@pytest.mark.skipif(os.geteuid() != 0, reason="a network namespace needs CAP_SYS_ADMIN (root)")
async def test_a_command_webhook_is_reached_only_through_its_bridge(
    tls: TlsPaths, kcp: Listener, tmp_path: Path
) -> None:
    hook = WebhookProcess(
        "byo-webhook",
        WebhookConfig(kcp_addr=f"127.0.0.1:{kcp.port}", command=OURS_AS_A_COMMAND),
        tls,
        log_path=tmp_path / "webhook.log",
    )
    async with hook:
        # It bound 0.0.0.0 in its own namespace; this network sees only the bridge.
        assert _listening(hook.webhook_port) == {"0100007F"}  # 127.0.0.1
        assert "https://0.0.0.0:" in (tmp_path / "webhook.log").read_text()
        assert await _admit(tls, hook.webhook_port) == "kcp request succeeded"  # sync mode
        event = await _next_event(kcp)
        assert (event.runtime_id, event.event.watched.name) == ("runtime-byo", "demo")
        samples = await hook.scrape()  # its metrics, through the bridge
        assert value(samples, "watcher_kcp_requests_total") == 1.0
        first_pid = hook.pid
        assert first_pid is not None
        assert await hook.kill() == -9  # the launcher, the bridge and the command
        await hook.start()
        assert await _admit(tls, hook.webhook_port) == "kcp request succeeded"
        await _next_event(kcp)
        second_pid = hook.pid
    assert second_pid is not None and not procfs.is_alive(second_pid)
    assert [r.exit_code for r in hook.records] == [-9, 0]  # SIGTERM: the command's own 0


def test_without_a_namespace_the_launcher_says_what_it_needs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def refused() -> None:
        raise OSError(1, "unshare(CLONE_NEWNET): Operation not permitted")

    monkeypatch.setattr(isolate, "enter_own_network", refused)
    addresses = ["--admission", "127.0.0.1:0", "--metrics", "127.0.0.1:0", "--kcp", "127.0.0.1:1"]
    code = isolate.main([*addresses, "--", "true"])
    assert code == isolate.EXIT_NO_NAMESPACE
    err = capsys.readouterr().err
    assert "CAP_SYS_ADMIN" in err and "WATCHER_HARNESS_WEBHOOK_ISOLATION=none" in err


def test_a_bad_launcher_call_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert isolate.main(["--admission", "h:1", "--metrics", "h:2", "--kcp", "h:3", "--"]) == 2
    assert "no command after --" in capsys.readouterr().err
