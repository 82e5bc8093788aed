"""assert / error / script / collect, bindings and matrix, apiserver metrics and reconcile
outcomes, run against the in-memory session: verdicts, diffs, attachments, output."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from runner_fake import FakeSession, opener

from harness.kcp.lifecycle_manager.queue.reconciler import Outcome, Reconcile
from harness.kcp.lifecycle_manager.queue.workqueue import Trigger
from harness.report import ReportBuilder, ScenarioReport, Status
from harness.runner import RunOptions, plan_scenario, run_scenario
from harness.scenario import InvalidScenario, loads_scenario, loads_scenario_instances

pytestmark = pytest.mark.usefixtures("no_leaked_tasks")

HEAD = "name: ops\nclusters: {skrs: [{name: skr-a}, {name: skr-b}]}\n"
VWC: dict[str, Any] = {
    "apiVersion": "admissionregistration.k8s.io/v1",
    "kind": "ValidatingWebhookConfiguration",
    "metadata": {"name": "skr-webhook", "labels": {"app": "watcher"}},
    "webhooks": [
        {"name": "klm.operator.kyma-project.io", "rules": [{"resources": ["kymas"]}]},
        {
            "name": "demo.operator.kyma-project.io",
            "rules": [{"resources": ["configmaps"]}],
            "clientConfig": {"url": "https://127.0.0.1:1/validate/demo-manager"},
        },
    ],
}


def with_vwc(session: FakeSession, *clusters: str, obj: dict[str, Any] = VWC) -> FakeSession:
    for cluster in clusters:
        session.objects[(cluster, obj["kind"], "", obj["metadata"]["name"])] = obj
    return session


async def run(text: str, session: FakeSession, head: str = HEAD) -> ScenarioReport:
    return await run_scenario(
        plan_scenario(loads_scenario(head + text)),
        ReportBuilder("t").scenario("ops", "ops.yaml"),
        RunOptions(open_session=opener(session)),
    )


ASSERT_VWC = """steps:
  - name: vwc
    try:
      - assert:
          cluster: "*"
          apiVersion: admissionregistration.k8s.io/v1
          kind: ValidatingWebhookConfiguration
          name: skr-webhook
          within: 500ms
          match:
            (length(webhooks)): 2
            webhooks:
              $contains:
                - name: demo.operator.kyma-project.io
                  rules: [{resources: [configmaps]}]
"""


async def test_assert_holds_on_every_skr() -> None:
    report = await run(ASSERT_VWC, with_vwc(FakeSession(), "skr-a", "skr-b"))
    assert report.status is Status.PASSED, report.error
    (result,) = report.expectations
    assert result.kind == "assert" and result.passed
    assert "skr-a: ValidatingWebhookConfiguration skr-webhook matches" in result.actual


async def test_assert_failure_shows_the_diff_and_attaches_the_objects() -> None:
    changed = {**VWC["webhooks"][1], "rules": [{"resources": ["secrets"]}]}
    wrong = {**VWC, "webhooks": [VWC["webhooks"][0], changed]}
    session = with_vwc(FakeSession(), "skr-a")
    with_vwc(session, "skr-b", obj=wrong)
    report = await run(ASSERT_VWC, session)
    assert report.status is Status.FAILED
    (result,) = report.expectations
    assert not result.passed
    assert "skr-b: 1 selected, none matches" in result.actual
    assert "skr-a" in result.actual and "matches" in result.actual
    assert "webhooks" in result.details and "configmaps" in result.details
    assert [a.name for a in result.attachments] == [
        "skr-b: ValidatingWebhookConfiguration skr-webhook"
    ]
    assert "secrets" in result.attachments[0].text


async def test_assert_on_a_missing_object_or_unreachable_cluster_fails() -> None:
    session = with_vwc(FakeSession(), "skr-a")
    session.unreachable.add("skr-b")
    report = await run(ASSERT_VWC, session)
    (result,) = report.expectations
    assert "skr-b: cannot read: skr-b: connection refused" in result.actual
    report = await run(ASSERT_VWC, with_vwc(FakeSession(), "skr-a"))
    assert "skr-b: no object selected" in report.expectations[0].actual


async def test_error_holds_when_nothing_matches_and_fails_when_one_does() -> None:
    text = """steps:
  - name: gone
    try:
      - error:
          cluster: skr-a
          apiVersion: admissionregistration.k8s.io/v1
          kind: ValidatingWebhookConfiguration
          within: 300ms
          match: {webhooks: {$contains: [{name: demo.operator.kyma-project.io}]}}
"""
    assert (await run(text, FakeSession())).status is Status.PASSED
    report = await run(text, with_vwc(FakeSession(), "skr-a"))
    assert report.status is Status.FAILED
    assert "matches, but no selected object may" in report.expectations[0].details


async def test_script_checks_exit_and_output_and_sees_kubeconfigs(tmp_path: Path) -> None:
    text = """steps:
  - name: s
    try:
      - script:
          command: 'echo "{\\"items\\": [{\\"name\\": \\"a\\"}]}"; echo $KUBECONFIG_SKR_A >&2'
          expect:
            stdout: {json: {items: [{name: a}]}}
            stderr: {regex: "skr-a\\\\.kubeconfig$"}
"""
    report = await run(text, FakeSession(workdir=tmp_path))
    assert report.status is Status.PASSED, [e.actual for e in report.expectations]
    assert report.expectations[0].kind == "script"
    assert "$ echo" in report.expectations[0].details


async def test_script_failure_exit_code_and_timeout() -> None:
    text = """steps:
  - name: s
    try:
      - script: {command: [sh, -c, "echo oops; exit 3"]}
"""
    report = await run(text, FakeSession())
    assert report.status is Status.FAILED
    assert report.expectations[0].actual == "exit 3"
    assert "oops" in report.expectations[0].details
    slow = """steps:
  - name: s
    try:
      - script: {command: "sleep 30", timeout: 300ms}
"""
    report = await run(slow, FakeSession())
    assert "killed after its timeout of 0.3 s" in report.expectations[0].actual


async def test_script_that_fails_only_the_first_time(tmp_path: Path) -> None:
    """The flaky pattern: a marker file makes the second run pass."""
    marker = tmp_path / "marker"
    text = f"""steps:
  - name: s
    try:
      - script: {{command: "test -e {marker} || {{ touch {marker}; exit 1; }}"}}
"""
    assert (await run(text, FakeSession())).status is Status.FAILED
    assert (await run(text, FakeSession())).status is Status.PASSED


async def test_collect_attaches_objects_and_events() -> None:
    session = with_vwc(FakeSession(), "skr-a")
    session.objects[("skr-a", "Event", "kyma-system", "e1")] = {
        "kind": "Event",
        "metadata": {"name": "e1", "namespace": "kyma-system"},
        "type": "Warning",
        "reason": "Failed",
        "message": "boom",
        "involvedObject": {"kind": "Kyma", "name": "default"},
    }
    text = """steps:
  - name: s
    try:
      - wait: 10ms
    finally:
      - collect: {cluster: skr-a, apiVersion: admissionregistration.k8s.io/v1,
                  kind: ValidatingWebhookConfiguration, events: true, namespace: ""}
"""
    report = await run(text, session)
    (result,) = report.expectations
    assert result.kind == "collect" and result.passed
    names = [a.name for a in result.attachments]
    assert names == ["skr-a: ValidatingWebhookConfiguration skr-webhook", "skr-a: events"]
    assert "Warning Failed Kyma/default: boom" in result.attachments[1].text


async def test_run_time_bindings_are_filled_in(tmp_path: Path) -> None:
    text = """bindings: {greeting: hello}
steps:
  - name: s
    bindings: {who: "${{ clusters.skr-a.server }}"}
    try:
      - script:
          command: "echo ${{ greeting }} ${{ who }} ${{ gateway.port }}"
          expect: {stdout: {contains: ["hello https://127.0.0.1:7443 8443"]}}
"""
    report = await run(text, FakeSession(workdir=tmp_path))
    assert report.status is Status.PASSED, report.expectations[0].actual


def test_unknown_binding_is_a_located_error_with_a_hint() -> None:
    text = (
        HEAD
        + """bindings: {greeting: hello}
steps:
  - name: s
    try:
      - script: {command: "echo ${{ greting }} ${{ clusters.skr-c.server }}"}
"""
    )
    with pytest.raises(InvalidScenario) as caught:
        loads_scenario(text, source="s.yaml")
    lines = [e.line() for e in caught.value.errors]
    assert lines == [
        "s.yaml:7:27: step 's', try[0].script.command: unknown binding 'greting'; "
        "did you mean 'greeting'?",
        "s.yaml:7:27: step 's', try[0].script.command: unknown binding "
        "'clusters.skr-c.server'; did you mean 'clusters.skr-b.server'?",
    ]


def test_matrix_gives_one_instance_per_combination() -> None:
    text = """name: fleet
matrix: {skrs: [1, 3], mode: [async, sync]}
clusters: {skrs: {count: "${{ matrix.skrs }}"}}
steps:
  - name: s
    try: [{wait: 1s}]
"""
    found = loads_scenario_instances(text)
    assert [s.name for s in found] == [
        "fleet-skrs-1-mode-async",
        "fleet-skrs-1-mode-sync",
        "fleet-skrs-3-mode-async",
        "fleet-skrs-3-mode-sync",
    ]
    assert [len(s.clusters.skrs) for s in found] == [1, 1, 3, 3]
    with pytest.raises(InvalidScenario, match="this matrix has 4 instances"):
        loads_scenario(text)


@pytest.mark.parametrize(
    ("matrix", "message"),
    [
        ("[1, 2]", "matrix is a mapping of key: [values...]"),
        ("{skrs: []}", "matrix.skrs needs a non-empty list of values"),
        ("{skrs: [{a: 1}]}", "matrix values are strings, numbers or booleans"),
    ],
)
def test_bad_matrix_is_located(matrix: str, message: str) -> None:
    text = f"name: m\nmatrix: {matrix}\nclusters: {{skrs: [{{name: a}}]}}\nsteps: []\n"
    with pytest.raises(InvalidScenario) as caught:
        loads_scenario_instances(text, source="m.yaml")
    assert message in caught.value.errors[0].line()
    assert caught.value.errors[0].location.line == 2


KLM = 'name="klm.operator.kyma-project.io"'
APISERVER_TEXT = f"""# TYPE apiserver_admission_webhook_request_total counter
apiserver_admission_webhook_request_total{{{KLM},operation="CREATE",code="200"}} 3
apiserver_admission_webhook_request_total{{{KLM},operation="UPDATE",code="200"}} 4
# TYPE apiserver_admission_webhook_admission_duration_seconds histogram
apiserver_admission_webhook_admission_duration_seconds_bucket{{name="klm",le="0.005"}} 6
apiserver_admission_webhook_admission_duration_seconds_bucket{{name="klm",le="0.025"}} 10
apiserver_admission_webhook_admission_duration_seconds_bucket{{name="klm",le="+Inf"}} 10
apiserver_admission_webhook_admission_duration_seconds_sum{{name="klm"}} 0.05
apiserver_admission_webhook_admission_duration_seconds_count{{name="klm"}} 10
"""


async def test_apiserver_metrics_sum_series_and_estimate_quantiles() -> None:
    session = FakeSession(apiserver_text={"skr-a": APISERVER_TEXT})
    text = """steps:
  - name: m
    try:
      - expect:
          within: 300ms
          metrics:
            - {target: apiserver/skr-a, name: apiserver_admission_webhook_request_total,
               labels: {name: klm.operator.kyma-project.io}, op: "==", value: 7}
            - target: apiserver/skr-a
              name: apiserver_admission_webhook_admission_duration_seconds_count
              op: ">="
              value: 10
            - target: apiserver/skr-a
              name: apiserver_admission_webhook_admission_duration_seconds
              quantile: 0.9
              op: "<="
              value: 0.025
            - {target: apiserver/skr-b, name: apiserver_admission_webhook_request_total, value: 0}
"""
    report = await run(text, session)
    assert report.status is Status.PASSED, [e.actual for e in report.expectations]


async def test_reconciles_filter_by_outcome() -> None:
    import time

    now = time.time() + 0.05
    session = FakeSession()
    for outcome in (Outcome.ERROR, Outcome.ERROR, Outcome.SUCCESS):
        session.reconcile_log.append(
            Reconcile(
                now, "kcp-system/kyma-skr-a", frozenset({Trigger.REQUEUE_TIMER}), now, 0.0, outcome
            )
        )
    text = """steps:
  - name: r
    try:
      - expect:
          within: 300ms
          reconciles:
            - {kyma: kyma-skr-a, outcome: error, count: {exactly: 2}}
            - {kyma: kyma-skr-a, outcome: success, trigger: requeue-timer, count: {exactly: 1}}
            - {kyma: kyma-skr-a, outcome: busy, none: true}
"""
    report = await run(text, session)
    assert report.status is Status.PASSED, [e.actual for e in report.expectations]


def test_watcher_manager_from_the_managed_by_label() -> None:
    text = (
        HEAD
        + """watchers:
  - {default: true}
  - name: demo
    labels: {operator.kyma-project.io/managed-by: demo-manager}
    annotations: {note: x}
    resource: configmaps
    service: {name: demo-events, port: 8090}
listeners: [{component: demo-manager, service: {name: demo-events, port: 8090}}]
steps:
  - name: s
    try:
      - expect: {events: [{manager: demo-manager, none: true}]}
"""
    )
    watcher = loads_scenario(text).watchers[1]
    rendered = watcher.to_dict()
    assert rendered["spec"]["manager"] == ""
    assert rendered["metadata"]["labels"] == {"operator.kyma-project.io/managed-by": "demo-manager"}
    assert rendered["metadata"]["annotations"] == {"note": "x"}
    broken = text.replace(
        "labels: {operator.kyma-project.io/managed-by: demo-manager}", "labels: {}"
    )
    with pytest.raises(InvalidScenario, match="empty and no label"):
        loads_scenario(broken)


def test_a_matrix_instance_dumps_and_loads_as_itself() -> None:
    from harness.scenario import dump_scenario

    text = """name: fleet
matrix: {skrs: [2]}
bindings: {last: "skr-${{ matrix.skrs }}"}
clusters: {skrs: {count: "${{ matrix.skrs }}"}}
steps:
  - name: s
    bindings: {who: "${{ last }}"}
    try: [{patch: {cluster: "${{ who }}", resource: kymas, name: default, patch: {}}}]
"""
    (instance,) = loads_scenario_instances(text)
    assert instance.matrix is None and instance.bindings == {"last": "skr-2"}
    assert instance.steps[0].bindings == {"who": "skr-2"}
    assert loads_scenario(dump_scenario(instance)) == instance
