"""Our KLM as a process (``watcher-klm``): its flags, its log as any KLM's is read, and the
pure decisions of its cert-manager and SKR Deployment steps."""

from __future__ import annotations

import datetime as dt
import io
import logging
from pathlib import Path

import pytest

from harness.kcp.klm_log import ReconcileHistory, observe, parse_record
from harness.kcp.klm_process import KlmFlags
from harness.kcp.lifecycle_manager.certificates.cert_manager_client import (
    client_certificate,
    issued_before_bundle,
)
from harness.kcp.lifecycle_manager.kyma.status import kyma_status
from harness.kcp.lifecycle_manager.main import ZapJson, main, parser
from harness.kcp.lifecycle_manager.queue.reconciler import RequeueIntervals
from harness.kcp.lifecycle_manager.skr_deployment import (
    RESTART_ANNOTATION,
    WebhookPending,
    deployment_ready,
    kcp_address,
    skr_objects,
)
from watcher import pki
from watcher.domain import CA_ADDED_ANNOTATION
from watcher.render.watcher_cr import parse_watchers


def test_it_takes_the_flags_the_harness_gives_any_klm() -> None:
    flags = KlmFlags(intervals=RequeueIntervals(success=2, busy=0.5), workers=3)
    argv = flags.argv(Path("/k"), 1, 2, 3)
    args = parser().parse_args([*argv, "--oci-registry-host=127.0.0.1:5000"])
    assert args.kubeconfig == "/k"
    assert args.kyma_skr_listener_bind_address == ("127.0.0.1", 3)
    assert (args.kyma_requeue_success_interval, args.kyma_requeue_busy_interval) == (2.0, 0.5)
    assert args.max_concurrent_kyma_reconciles == 3
    assert args.skr_watcher_image_tag == "harness"


@pytest.mark.parametrize("bad", ["--kyma-requeue-busy-interval=5", "--no-such-flag=1"])
def test_a_bad_flag_is_refused_by_name(bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parser().parse_args(["--kubeconfig=/k", bad])
    assert bad.split("=")[0].lstrip("-") in capsys.readouterr().err


def test_its_log_reads_as_any_klm_log() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(ZapJson())
    log = logging.getLogger("test.klm")
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    try:
        log.info("event received from SKR, adding kcp-system/k to queue")
        context = {"controller": "kyma", "namespace": "kcp-system", "name": "k"}
        started = {**context, "reconcileID": "r1", "trigger": "requeue-timer,watch-event"}
        log.info("Kyma reconciliation started", extra={"context": started})
        failed = {**context, "reconcileID": "r1", "error": "boom"}
        log.info("Reconciler error", extra={"context": failed})
        log.info("Kyma reconciliation finished", extra={"context": {**failed, "outcome": "error"}})
    finally:
        log.removeHandler(handler)
    history = ReconcileHistory()
    for line in stream.getvalue().splitlines():
        record = parse_record(line)
        assert record is not None, line
        found = observe(record)
        assert found is not None
        history.add(found)
    (reconcile,) = history.reconciles
    assert reconcile.triggers == {"watch-event", "requeue-timer"}
    assert reconcile.failed and reconcile.error == "boom" and reconcile.outcome == "error"


def test_the_certificate_it_asks_cert_manager_for() -> None:
    cert = client_certificate("kyma-a", "runtime-a", "a.example.com")
    spec = cert["spec"]
    assert cert["metadata"] == {
        "name": "kyma-a-webhook-tls",
        "namespace": "istio-system",
        "labels": {
            "operator.kyma-project.io/purpose": "klm-watcher-cert-manager",
            "operator.kyma-project.io/managed-by": "lifecycle-manager",
        },
    }
    assert spec["commonName"] == "runtime-a" and spec["dnsNames"][0] == "a.example.com"
    assert spec["issuerRef"]["name"] == "klm-watcher-selfsigned"
    assert spec["privateKey"]["size"] == 4096


def test_a_certificate_older_than_the_newest_ca_is_renewed() -> None:
    ca = pki.create_ca(key_type="ec")
    now = dt.datetime.now(dt.UTC)
    leaf = pki.issue_runtime_certificate(ca, "r", "d.example.com", now=now, key_type="ec")

    def gateway(at: dt.datetime) -> dict[str, object]:
        stamp = at.strftime("%Y-%m-%dT%H:%M:%SZ")
        return {"metadata": {"annotations": {CA_ADDED_ANNOTATION: stamp}}}

    assert issued_before_bundle(leaf.certificate, gateway(now + dt.timedelta(minutes=5)))
    assert not issued_before_bundle(leaf.certificate, gateway(now - dt.timedelta(minutes=5)))
    assert not issued_before_bundle(leaf.certificate, None)


def test_the_kcp_address_is_the_gateways_first_host_and_port() -> None:
    server = {"hosts": ["127.0.0.1"], "port": {"number": 44891}}
    assert kcp_address({"spec": {"servers": [server]}}) == "127.0.0.1:44891"
    server = {"hosts": ["kcp-system/::1"], "port": {"number": 443}}
    assert kcp_address({"spec": {"servers": [server]}}) == "[::1]:443"
    with pytest.raises(WebhookPending):
        kcp_address(None)


def test_a_deployment_is_ready_at_its_generation_only() -> None:
    deployment = {
        "metadata": {"generation": 2},
        "spec": {"replicas": 1},
        "status": {"observedGeneration": 1, "readyReplicas": 1},
    }
    assert not deployment_ready(deployment)
    deployment["status"]["observedGeneration"] = 2
    assert deployment_ready(deployment)
    assert not deployment_ready(None)


def test_the_skr_gets_the_webhook_set_rolled_by_its_certificate() -> None:
    ca = pki.create_ca(key_type="ec")
    leaf = pki.issue_runtime_certificate(ca, "r", "d.example.com", key_type="ec")
    tls = pki.secret_data(leaf, ca.cert_pem)
    watcher = {
        "apiVersion": "operator.kyma-project.io/v1beta2",
        "kind": "Watcher",
        "metadata": {"name": "w", "namespace": "kcp-system", "labels": {}},
        "spec": {
            "manager": "lifecycle-manager",
            "serviceInfo": {"name": "s", "namespace": "kcp-system", "port": 8082},
            "resourceToWatch": {
                "group": "operator.kyma-project.io",
                "version": "*",
                "resource": "kymas",
            },
            "field": "spec",
            "gateway": {
                "selector": {"matchLabels": {"operator.kyma-project.io/watcher-gateway": "default"}}
            },
        },
    }
    objects = skr_objects(
        image="i:t", kcp_addr="127.0.0.1:1", tls=tls, watchers=parse_watchers([watcher])
    )
    kinds = [o["kind"] for o in objects]
    assert kinds[-1] == "ValidatingWebhookConfiguration" and kinds.count("Deployment") == 1
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    assert annotations[RESTART_ANNOTATION] == format(leaf.certificate.serial_number, "x")
    none = skr_objects(image="i:t", kcp_addr="127.0.0.1:1", tls=tls, watchers=())
    assert "ValidatingWebhookConfiguration" not in [o["kind"] for o in none]


def test_a_kyma_is_ready_only_with_its_watcher_running() -> None:
    pending = kyma_status(None, [], catalog_synced=True, webhook_installed=False, at=1.0)
    assert pending["state"] == "Processing"
    ready = kyma_status(None, [], catalog_synced=True, webhook_installed=True, at=1.0)
    assert ready["state"] == "Ready" and "activeChannel" not in ready
    fast = kyma_status(ready, [], catalog_synced=True, channel="fast", at=2.0)
    assert fast["activeChannel"] == "fast"


def test_an_unusable_kubeconfig_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # the process's own logging set-up would replace the test run's handlers
    monkeypatch.setattr("harness.kcp.lifecycle_manager.main.configure_logging", lambda _: None)
    bad = tmp_path / "kubeconfig"
    bad.write_text("apiVersion: v1\n")
    assert main(["--kubeconfig", str(bad)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"watcher-klm: --kubeconfig {bad}: Invalid kube-config")
    assert "Traceback" not in "\n".join(err)
