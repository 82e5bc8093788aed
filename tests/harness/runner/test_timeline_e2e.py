"""``timeline`` against real clusters: a Kyma created in the KCP for an SKR provisioned
without one; the object watches (list+watch on the SKR's API server) see the SKR Kyma
created before the ``skr-webhook`` ValidatingWebhookConfiguration appears. The reverse
order failing is covered by ``test_timeline.py`` with a fake session."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from harness.clusters.binaries import Binaries
from harness.report import ReportBuilder, Status
from harness.report.model import TimelineKind
from harness.runner import RunOptions, plan_scenario, run_scenario
from harness.scenario import loads_scenario

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

SCENARIO = """\
name: timeline-kyma-vwc
clusters: {skrs: [{name: skr-a, kyma: false}]}
settings: {klm: {watcherRollout: reconcile}}  # KLM's: the webhook comes with a reconcile
steps:
  - name: create-kyma
    try:
      - apply:
          cluster: kcp
          object:
            apiVersion: operator.kyma-project.io/v1beta2
            kind: Kyma
            metadata:
              name: kyma-skr-a
              namespace: kcp-system
              labels: {kyma-project.io/runtime-id: runtime-skr-a}
              annotations: {skr-domain: skr-a.kyma.example.com}
            spec: {channel: regular}
      - expect:
          within: 20s
          timeline:
            - first: {object: {cluster: skr-a, resource: kymas, namespace: kyma-system,
                               name: default, change: added}}
              then: {object: {cluster: skr-a, apiVersion: admissionregistration.k8s.io/v1,
                              kind: ValidatingWebhookConfiguration, name: skr-webhook,
                              change: added, match: {(length(webhooks)): 1}}}
              within: 10s
            - first: {write: {cluster: kcp, name: kyma-skr-a}}
              then: {reconcile: {kyma: kyma-skr-a, trigger: kyma-created,
                                 outcome: [success, warning]}}
            - first: {step: {name: create-kyma}}
              then: {object: {cluster: skr-a, resource: kymas, namespace: kyma-system,
                              name: default, change: added}}
"""


async def test_the_skr_kyma_is_created_before_its_webhook_configuration(
    tmp_path: Path, cluster_binaries: Binaries
) -> None:
    started = time.monotonic()
    report = await run_scenario(
        plan_scenario(loads_scenario(SCENARIO, source=str(tmp_path / "timeline.yaml"))),
        ReportBuilder("e2e").scenario("timeline-kyma-vwc", "timeline.yaml"),
        RunOptions(log_dir=tmp_path / "logs"),
    )
    failures = [(e.id, e.actual, e.details) for e in report.expectations if not e.passed]
    assert report.status is Status.PASSED, (report.error, failures, report.steps)
    assert [e.kind for e in report.expectations] == ["timeline"] * 3
    assert "then ValidatingWebhookConfiguration skr-webhook on skr-a added at +" in (
        report.expectations[0].actual
    )
    objects = [
        (t.source, t.object, t.detail) for t in report.timeline if t.kind is TimelineKind.OBJECT
    ]
    assert ("skr-a", "kyma-system/Kyma/default", "added") in objects
    assert ("skr-a", "ValidatingWebhookConfiguration/skr-webhook", "added") in objects
    print(f"timeline e2e: {time.monotonic() - started:.1f} s")
