"""``watcher-harness conformance``: our webhook and listener pass, upstream's listener is
identical everywhere, and deliberately wrong implementations are caught."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from harness.cli import main
from harness.conformance.listener import check_listener
from harness.conformance.verdicts import CheckResult, Verdict, passed
from harness.conformance.webhook import check_webhook
from harness.kcp.listener_process import template_command

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="the webhook's network namespace needs CAP_SYS_ADMIN (root)"
)

HERE = Path(__file__).parent
BIN = Path(sys.executable).parent
SYNC_WEBHOOK = ["env", "WATCHER_DELIVERY_MODE=sync", str(BIN / "watcher-webhook")]
OUR_LISTENER = [
    str(BIN / "watcher-listener"),
    *("--component", "{component}", "--host", "{host}", "--port", "{port}"),
    "--insecure-trust-any-xfcc",
]
OUR_DOCUMENTED_WEBHOOK = {
    "body that is not JSON",
    "admission server offered h2 and http/1.1",
    "go_* runtime metrics",
    "KCP_ADDR unset",
}


def verdicts(results: list[CheckResult]) -> dict[str, Verdict]:
    return {f"{r.area}: {r.check}": r.verdict for r in results}


def documented(results: list[CheckResult]) -> set[str]:
    return {r.check for r in results if r.verdict is Verdict.DOCUMENTED}


async def test_our_webhook_in_sync_mode_answers_and_sends_as_upstream(tmp_path: Path) -> None:
    results = await check_webhook(SYNC_WEBHOOK, tmp_path)
    assert passed(results), [r for r in results if r.verdict is Verdict.DIFFERS]
    assert documented(results) == OUR_DOCUMENTED_WEBHOOK
    checks = verdicts(results)
    assert checks["KCP request: CREATE"] is Verdict.IDENTICAL
    assert checks["admission: CREATE"] is Verdict.IDENTICAL  # "kcp request succeeded"
    assert len([r for r in results if r.area == "KCP request"]) == 13


async def test_our_async_webhook_answers_queued_a_documented_choice(tmp_path: Path) -> None:
    results = await check_webhook([str(BIN / "watcher-webhook")], tmp_path)
    assert passed(results)
    queued = {r.check for r in results if r.actual.endswith("kcp request queued")}
    assert queued == {
        "CREATE",
        "UPDATE spec changed",
        "UPDATE object without spec",
        "UPDATE status changed",
        "DELETE",
    }
    assert queued <= documented(results)


async def test_a_webhook_that_capitalises_watched_gvk_differs(tmp_path: Path) -> None:
    command = [sys.executable, str(HERE / "wrong_webhook.py"), "capitalised-gvk"]
    results = await check_webhook(command, tmp_path)
    assert not passed(results)
    differs = {r.check for r in results if r.verdict is Verdict.DIFFERS}
    assert "CREATE" in differs and "KCP_CONTRACT=v1 (the v2 body to /v1, no owner)" in differs
    [create] = [r for r in results if r.area == "KCP request" and r.check == "CREATE"]
    assert '"WatchedGvk"' in create.actual and '"watchedGvk"' in create.upstream


async def test_a_webhook_answering_500_to_bad_json_differs(tmp_path: Path) -> None:
    command = [sys.executable, str(HERE / "wrong_webhook.py"), "error-500"]
    results = await check_webhook(command, tmp_path)
    [bad] = [r for r in results if r.check == "body that is not JSON"]
    assert (bad.actual, bad.verdict) == ("500, JSON error", Verdict.DIFFERS)
    assert [r.check for r in results if r.verdict is Verdict.DIFFERS] == [bad.check]


async def test_our_listener_passes(tmp_path: Path) -> None:
    results = await check_listener(
        template_command(OUR_LISTENER), tmp_path, implementation="ours", metrics_on_own_port=False
    )
    assert passed(results)
    assert documented(results) == {"contract v1 path", "body that is not JSON"}


async def test_a_listener_taking_events_without_a_certificate_differs(tmp_path: Path) -> None:
    words = [sys.executable, str(HERE / "wrong_listener.py"), "--component", "{component}"]
    results = await check_listener(
        template_command([*words, "--port", "{port}"]), tmp_path, metrics_on_own_port=False
    )
    differs = {r.check for r in results if r.verdict is Verdict.DIFFERS}
    assert {"no X-Forwarded-Client-Cert", "certificate without a CN"} <= differs
    assert "events handed over (runtime id = the CN; none for refusals)" in differs


def test_the_command_prints_the_table_writes_json_and_exits_by_verdict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "results.json"
    wrong = (
        f"{sys.executable} {HERE / 'wrong_listener.py'} --component {{component}} --port {{port}}"
    )
    assert main(["conformance", "--listener-command", wrong, "--json", str(out)]) == 1
    printed = capsys.readouterr().out
    assert "differs" in printed and "differ" in printed.splitlines()[-1]
    rows = json.loads(out.read_text())
    assert {row["verdict"] for row in rows} >= {"identical", "differs"}
    assert main(["conformance", "--listener", "ours"]) == 0
    assert "0 differ" in capsys.readouterr().out


def test_nothing_to_check_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["conformance"]) == 2
    assert "--webhook-command" in capsys.readouterr().err


def test_a_webhook_that_cannot_start_is_reported_not_judged(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["conformance", "--webhook-command", "/nonexistent/webhook"]) == 2
    assert "could not run it" in capsys.readouterr().err


@pytest.mark.e2e
def test_upstreams_own_listener_is_identical_everywhere(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The vectors are upstream's: its Go listener (built from the Go module proxy) meets
    every one of them."""
    assert main(["conformance", "--listener", "upstream"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("13 identical, 0 documented choices, 0 differ"), last
