"""The harness's webhook keeps its durable spool across a SIGKILL and a restart."""

from __future__ import annotations

from pathlib import Path

from harness.skr.certs import issue_webhook_certificate
from harness.skr.metrics import value
from harness.skr.objects import delivery_is_async
from harness.skr.webhook import TlsPaths, WebhookConfig, WebhookProcess, webhook_env
from watcher import pki
from watcher.webhook.spool import Spool

EVENT = b'{"watched":{"Namespace":"kyma-system","Name":"kyma-1"}}'


def test_spool_dir_is_passed_on_and_extra_env_can_turn_it_off(tmp_path: Path) -> None:
    tls = TlsPaths(tmp_path)
    on = WebhookConfig(kcp_addr="127.0.0.1:9443", spool_dir=tmp_path / "spool")
    env = webhook_env(on, tls, webhook_port=1, metrics_port=2, base={})
    assert env["WATCHER_SPOOL_DIR"] == str(tmp_path / "spool")
    off = WebhookConfig(
        kcp_addr="127.0.0.1:9443",
        spool_dir=tmp_path / "spool",
        extra_env={"WATCHER_SPOOL_DIR": ""},
    )
    assert webhook_env(off, tls, webhook_port=1, metrics_port=2, base={})["WATCHER_SPOOL_DIR"] == ""
    assert "WATCHER_SPOOL_DIR" not in webhook_env(
        WebhookConfig(kcp_addr="127.0.0.1:9443"), tls, webhook_port=1, metrics_port=2, base={}
    )


def test_spool_only_for_async_delivery() -> None:
    assert delivery_is_async(WebhookConfig(kcp_addr="a:1"))
    assert not delivery_is_async(WebhookConfig(kcp_addr="a:1", delivery_mode="sync"))
    sync_by_env = WebhookConfig(kcp_addr="a:1", extra_env={"WATCHER_DELIVERY_MODE": "sync"})
    assert not delivery_is_async(sync_by_env)


async def test_restarted_process_replays_what_the_killed_one_left(tmp_path: Path) -> None:
    ca = pki.create_ca(key_type="ec")
    leaf = issue_webhook_certificate(ca, "rt-spool", "spool.example.com")
    pki.write_secret_files(tmp_path, pki.secret_data(leaf, ca.cert_pem))
    spool_dir = tmp_path / "spool"
    left = Spool(spool_dir)  # what a killed webhook left: one event never delivered
    left.open()
    left.append("/v2/lifecycle-manager/event", EVENT)
    left.close()
    hook = WebhookProcess(
        "watcher-webhook[spool]",
        WebhookConfig(
            kcp_addr="127.0.0.1:1",  # refused: the event stays queued
            log_level="WARNING",
            spool_dir=spool_dir,
            extra_env={
                "WATCHER_RETRY_MAX_SECONDS": "0.5",
                "WATCHER_RETRY_BASE_SECONDS": "0.1",
                "WATCHER_DRAIN_TIMEOUT_SECONDS": "1",
            },
        ),
        TlsPaths(tmp_path),
        log_path=tmp_path / "webhook.log",
    )
    async with hook:
        for _ in range(2):  # first start, then a start after SIGKILL
            samples = await hook.scrape()
            assert value(samples, "watcher_spool_replayed_total") == 1.0
            assert value(samples, "watcher_spool_events") == 1.0
            assert value(samples, "watcher_events_delivered_total") == 0.0
            assert await hook.kill() == -9
            await hook.start()
    assert [r.exit_code for r in hook.records] == [-9, -9, 0]
    after = Spool(spool_dir)  # the graceful stop kept it too (not delivered)
    assert [r.body for r in after.open()] == [EVENT]
    after.close()
