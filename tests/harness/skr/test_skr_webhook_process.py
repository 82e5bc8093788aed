"""harness.skr.webhook.WebhookProcess: the real ``watcher-webhook``, killed and restarted."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.clusters import procfs
from harness.clusters.process import owned_process_groups
from harness.skr.certs import issue_webhook_certificate
from harness.skr.metrics import value
from harness.skr.webhook import TlsPaths, WebhookConfig, WebhookProcess
from watcher import pki


@pytest.fixture
def hook(tmp_path: Path) -> WebhookProcess:
    """Our webhook for one SKR with a KCP address nobody answers (not started yet)."""
    ca = pki.create_ca(key_type="ec")
    leaf = issue_webhook_certificate(ca, "rt-proc", "proc.example.com")
    pki.write_secret_files(tmp_path, pki.secret_data(leaf, ca.cert_pem))
    return WebhookProcess(
        "watcher-webhook[test]",
        WebhookConfig(kcp_addr="127.0.0.1:1", log_level="WARNING"),
        TlsPaths(tmp_path),
        log_path=tmp_path / "webhook.log",
    )


async def test_restarts_on_the_same_ports_after_sigkill(hook: WebhookProcess) -> None:
    async with hook:
        first_pid, port, metrics_port = hook.pid, hook.webhook_port, hook.metrics_port
        assert first_pid is not None and procfs.is_alive(first_pid)
        samples = await hook.scrape()
        assert value(samples, "watcher_admission_request_total") == 0.0

        code = await hook.kill()
        assert code == -9 and not hook.running and not procfs.is_alive(first_pid)
        assert hook.records[0].stop_signal == "SIGKILL"

        await hook.start()
        assert (hook.webhook_port, hook.metrics_port) == (port, metrics_port)
        assert hook.pid not in (None, first_pid)
        second_pid = hook.pid
        assert second_pid is not None
    assert not hook.running and not procfs.is_alive(second_pid)
    assert second_pid not in owned_process_groups()
    assert [r.exit_code for r in hook.records] == [-9, 0]


async def test_a_scrape_during_a_restart_waits_for_the_new_incarnation(
    hook: WebhookProcess,
) -> None:
    """A rotation restarts a bring-your-own webhook; a metric read meanwhile must not fail."""
    import asyncio

    async with hook:
        first = hook.pid
        restart = asyncio.create_task(hook.restart())
        await asyncio.sleep(0)  # the restart has begun: the old incarnation is stopping
        samples = await hook.scrape()
        await restart
        assert value(samples, "watcher_admission_request_total") == 0.0
        assert hook.pid not in (None, first)
