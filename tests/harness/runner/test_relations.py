"""The second round of the scenario language, run against the in-memory session:
``capture`` on ``assert`` and ``script``, ``set``, references in keys, ``count`` on
``assert``, reconcile outcomes as alternatives and ``script`` polling."""

from __future__ import annotations

import base64
import time
from pathlib import Path
from typing import Any

import pytest
from runner_fake import FakeSession, opener

from harness.kcp.lifecycle_manager.queue.reconciler import Outcome, Reconcile
from harness.kcp.lifecycle_manager.queue.workqueue import Trigger
from harness.report import ReportBuilder, ScenarioReport, Status
from harness.runner import RunOptions, plan_scenario, run_scenario
from harness.scenario import loads_scenario

pytestmark = pytest.mark.usefixtures("no_leaked_tasks")

HEAD = "name: rel\nclusters: {skrs: [{name: skr-a}]}\n"
CERT = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nabc\n-----END CERTIFICATE-----\n").decode()


def secret(name: str, namespace: str, cert: str, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "data": {"tls.crt": cert},
    }


def put(session: FakeSession, cluster: str, obj: dict[str, Any]) -> FakeSession:
    meta = obj["metadata"]
    session.objects[(cluster, obj["kind"], meta.get("namespace", ""), meta["name"])] = obj
    return session


async def run(text: str, session: FakeSession, tmp: Path | None = None) -> ScenarioReport:
    scenario = loads_scenario(HEAD + text, source=str(tmp / "s.yaml") if tmp else "<string>")
    return await run_scenario(
        plan_scenario(scenario),
        ReportBuilder("t").scenario("rel", "rel.yaml"),
        RunOptions(open_session=opener(session)),
    )


SAME_CERT = """steps:
  - name: same-certificate
    try:
      - assert:
          cluster: kcp
          resource: secrets
          namespace: istio-system
          name: kyma-skr-a-webhook-tls
          capture: {kcpCert: 'data."tls.crt"', owner: metadata.name}
      - set: {label: "${{ owner }}"}
      - assert:
          cluster: skr-a
          resource: secrets
          namespace: kyma-system
          name: skr-webhook-tls
          within: 300ms
          match:
            data: {tls.crt: "${{ kcpCert }}"}
            metadata: {labels: {"${{ label }}": "yes"}}
"""


async def test_a_captured_value_is_compared_with_another_object_and_fills_keys() -> None:
    session = FakeSession()
    put(session, "kcp", secret("kyma-skr-a-webhook-tls", "istio-system", CERT))
    put(
        session,
        "skr-a",
        secret("skr-webhook-tls", "kyma-system", CERT, **{"kyma-skr-a-webhook-tls": "yes"}),
    )
    report = await run(SAME_CERT, session)
    assert report.status is Status.PASSED, (report.error, report.expectations)
    assert [e.kind for e in report.expectations] == ["assert", "assert"]


async def test_a_different_value_fails_with_the_diff() -> None:
    session = FakeSession()
    put(session, "kcp", secret("kyma-skr-a-webhook-tls", "istio-system", CERT))
    other = secret(
        "skr-webhook-tls", "kyma-system", "b3RoZXI=", **{"kyma-skr-a-webhook-tls": "yes"}
    )
    put(session, "skr-a", other)
    report = await run(SAME_CERT, session)
    assert report.status is Status.FAILED
    failed = report.expectations[-1]
    assert not failed.passed and "tls.crt" in failed.details and "b3RoZXI=" in failed.details


async def test_a_capture_that_finds_nothing_fails_its_step_and_later_use_says_why() -> None:
    text = """steps:
  - name: capture
    try:
      - assert:
          cluster: kcp
          resource: secrets
          namespace: istio-system
          name: kyma-skr-a-webhook-tls
          capture: {missing: data.nothing}
  - name: use
    try:
      - set: {again: "${{ missing }}"}
"""
    session = put(FakeSession(), "kcp", secret("kyma-skr-a-webhook-tls", "istio-system", CERT))
    report = await run(text, session)
    assert report.status is Status.FAILED
    assert "capture missing: 'data.nothing' is null" in (report.steps[0].error or "")
    assert report.steps[1].status is Status.SKIPPED


async def test_a_value_used_before_it_is_captured_fails_with_the_reason() -> None:
    text = """steps:
  - name: too-early
    try:
      - set: {early: "${{ later }}"}
  - name: capture
    try:
      - set: {later: 1}
"""
    report = await run(text, FakeSession())
    assert report.status is Status.FAILED
    assert "no value yet for 'later'" in (report.steps[0].error or "")


async def test_count_on_assert_counts_matching_objects() -> None:
    session = FakeSession()
    for i in range(3):
        put(session, "kcp", secret(f"m-{i}", "kcp-system", CERT, kyma="kyma-skr-a"))
    put(session, "kcp", secret("other", "kcp-system", CERT, kyma="kyma-skr-b"))

    def text(count: str) -> str:
        return f"""steps:
  - name: count
    try:
      - assert:
          cluster: kcp
          resource: secrets
          namespace: kcp-system
          within: 300ms
          count: {count}
          match: {{metadata: {{labels: {{kyma: kyma-skr-a}}}}}}
"""

    assert (await run(text("{exactly: 3}"), session)).status is Status.PASSED
    assert (await run(text("{atLeast: 2, atMost: 3}"), session)).status is Status.PASSED
    report = await run(text("{exactly: 2}"), session)
    assert report.status is Status.FAILED
    actual = report.expectations[0].actual
    assert "3 of 4 selected match" in actual and "Secret kcp-system/m-0" in actual
    assert "exactly 2 objects" in report.expectations[0].expected
    report = await run(text("{atLeast: 4}"), session)
    assert report.status is Status.FAILED
    assert "closest that does not match" in report.expectations[0].details


async def test_reconcile_outcome_alternatives() -> None:
    session = FakeSession()
    at = time.time() + 1  # inside the step's window, which opens after this
    triggers = frozenset({Trigger.WATCH_EVENT})
    session.reconcile_log.append(
        Reconcile(at, "kcp-system/kyma-skr-a", triggers, at, 0.0, Outcome.WARNING)
    )
    text = """steps:
  - name: outcome
    try:
      - expect:
          within: 300ms
          reconciles: [{kyma: kyma-skr-a, outcome: OUTCOMES}]
"""
    passed = await run(text.replace("OUTCOMES", "[error, warning]"), session)
    assert passed.status is Status.PASSED, passed.expectations
    assert "outcome=error|warning" in passed.expectations[0].description
    failed = await run(text.replace("OUTCOMES", "[error, busy]"), session)
    assert failed.status is Status.FAILED


async def test_script_polls_until_it_passes_and_captures_its_json(tmp_path: Path) -> None:
    counter = tmp_path / "n"
    text = f"""steps:
  - name: poll
    try:
      - script:
          command: >-
            n=$(cat {counter} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {counter};
            echo '{{"runs": '$n', "ready": '$([ $n -ge 3 ] && echo true || echo false)'}}'
          within: 5s
          interval: 100ms
          expect: {{stdout: {{json: {{ready: true}}}}}}
          capture: {{runs: runs}}
      - script:
          command: test "${{{{ runs }}}}" = 3
"""
    report = await run(text, FakeSession(), tmp_path)
    assert report.status is Status.PASSED, (report.error, report.expectations)
    first = report.expectations[0]
    assert "(run 3)" in first.actual and '"runs": 3' in first.details


async def test_script_poll_gives_up_at_within_and_reports_the_last_run(tmp_path: Path) -> None:
    text = """steps:
  - name: poll
    try:
      - script: {command: "echo not-yet; exit 1", within: 600ms, interval: 100ms}
"""
    report = await run(text, FakeSession(), tmp_path)
    assert report.status is Status.FAILED
    result = report.expectations[0]
    assert "last of" in result.actual and "not-yet" in result.details
    assert result.duration < 3
