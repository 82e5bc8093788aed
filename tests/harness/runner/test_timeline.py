"""``timeline`` in a run: object watches started before the first step (only when an entry
names objects), changes recorded with their arrival time and put on the report's timeline,
pre-existing objects not counted as added, watches stopped at the end."""

from __future__ import annotations

import time

import pytest
from runner_fake import FakeSession, opener

from harness.report import ReportBuilder, ScenarioReport, Status
from harness.report.model import TimelineKind
from harness.runner import RunOptions, plan_scenario, run_scenario
from harness.scenario import loads_scenario

pytestmark = pytest.mark.usefixtures("no_leaked_tasks")

HEAD = "name: tl\nclusters: {skrs: [{name: skr-a}]}\n"
APPLY_KYMA = (
    "{apply: {cluster: skr-a, object: {apiVersion: operator.kyma-project.io/v1beta2, "
    "kind: Kyma, metadata: {name: default, namespace: kyma-system}, spec: {channel: fast}}}}"
)
APPLY_VWC = (
    "{apply: {cluster: skr-a, object: {apiVersion: admissionregistration.k8s.io/v1, "
    "kind: ValidatingWebhookConfiguration, metadata: {name: skr-webhook}}}}"
)
KYMA = (
    "{object: {cluster: skr-a, resource: kymas, namespace: kyma-system, name: default, "
    "change: added, match: {spec: {channel: fast}}}}"
)
VWC = (
    "{object: {cluster: skr-a, apiVersion: admissionregistration.k8s.io/v1, "
    "kind: ValidatingWebhookConfiguration, name: skr-webhook, change: added}}"
)


async def run(text: str, session: FakeSession) -> ScenarioReport:
    return await run_scenario(
        plan_scenario(loads_scenario(HEAD + text)),
        ReportBuilder("t").scenario("tl", "tl.yaml"),
        RunOptions(open_session=opener(session)),
    )


def steps(first: str, then: str, *, within: str = "2s") -> str:
    return f"""steps:
  - name: create
    try:
      - {APPLY_KYMA}
      - wait: 50ms
      - {APPLY_VWC}
      - expect:
          within: {within}
          timeline:
            - {{first: {first}, then: {then}}}
            - {{first: {{step: {{name: create}}}}, then: {{write: {{name: skr-webhook}}}}}}
"""


async def test_the_kyma_before_the_webhook_configuration_passes_with_object_entries() -> None:
    session = FakeSession()
    report = await run(steps(KYMA, VWC), session)
    assert report.status is Status.PASSED, report
    assert [e.id for e in report.expectations] == ["tl/create/1-timeline", "tl/create/2-timeline"]
    assert "(0.0" in report.expectations[0].actual  # about 50 ms apart
    assert [w.key for w in session.watched] == [
        "skr-a:operator.kyma-project.io/v1beta2/kymas:kyma-system",
        "skr-a:admissionregistration.k8s.io/v1/ValidatingWebhookConfiguration",
    ]
    objects = [
        (t.source, t.object, t.detail) for t in report.timeline if t.kind is TimelineKind.OBJECT
    ]
    assert objects == [
        ("skr-a", "kyma-system/Kyma/default", "added"),
        ("skr-a", "ValidatingWebhookConfiguration/skr-webhook", "added"),
    ]


async def test_the_reverse_order_fails_at_once() -> None:
    started = time.monotonic()
    report = await run(steps(VWC, KYMA, within="5s"), FakeSession())
    assert report.status is Status.FAILED
    failed = report.expectations[0]
    assert not failed.passed and failed.actual.startswith("then happened 0.0")
    assert "s before first: Kyma kyma-system/default on skr-a added at +" in failed.actual
    assert time.monotonic() - started < 2.0  # final: no need to poll for 5 s


async def test_objects_that_existed_before_are_not_added_but_their_changes_count() -> None:
    session = FakeSession()
    kyma = {
        "apiVersion": "operator.kyma-project.io/v1beta2",
        "kind": "Kyma",
        "metadata": {"name": "default", "namespace": "kyma-system"},
    }
    session.objects[("skr-a", "Kyma", "kyma-system", "default")] = kyma
    modified = KYMA.replace("change: added", "change: modified")
    report = await run(steps(KYMA, VWC, within="300ms"), session)
    assert report.status is Status.FAILED
    assert report.expectations[0].actual.startswith("first never happened: kymas ")
    assert "modified at +" in report.expectations[0].details  # the closest candidate
    session = FakeSession()
    session.objects[("skr-a", "Kyma", "kyma-system", "default")] = kyma
    assert (await run(steps(modified, VWC), session)).status is Status.PASSED


async def test_no_watch_without_an_object_selector() -> None:
    session = FakeSession()
    report = await run(steps("{write: {name: default}}", "{write: {name: skr-webhook}}"), session)
    assert report.status is Status.PASSED, report
    assert session.watched == []
    assert not any(t.kind is TimelineKind.OBJECT for t in report.timeline)
