"""``expect: {timeline: [...]}``: the model, located validation errors and cross-references
(one line each, file:line:column), and the object watches a scenario needs."""

from __future__ import annotations

import pytest

from harness.scenario import InvalidScenario, ObjectWatch, ResourceRef, loads_scenario
from harness.scenario.timeline import kept_keys, object_watches

HEAD = (
    "name: s\nclusters: {skrs: [{name: skr-a}, {name: skr-b}]}\nsteps:\n  - name: x\n"
    "    try:\n      - expect:\n          timeline:\n"
)
# HEAD is seven lines: the first entry is on line 8.
W = "\n              then: {write: {}}\n"
KYMA = "{cluster: skr-a, resource: kymas, namespace: kyma-system, name: default}"
VWC = (
    "{cluster: skr-a, apiVersion: admissionregistration.k8s.io/v1, "
    "kind: ValidatingWebhookConfiguration, name: skr-webhook}"
)
AT = "s.yaml:8:{col}: step 'x', try[0].expect.timeline[0]."

CASES = {
    "no-selector": (
        "            - first: {}" + W,
        AT.format(col=22) + "first: give exactly one of object, write, event, reconcile, "
        "step, fault (got none)",
    ),
    "two-selectors": (
        f"            - first: {{object: {KYMA}, write: {{}}}}" + W,
        AT.format(col=22) + "first: give exactly one of object, write, event, reconcile, "
        "step, fault (got object, write)",
    ),
    "unknown-cluster": (
        "            - first: {object: {cluster: skr-c, resource: kymas}}" + W,
        AT.format(col=41) + "first.object.cluster: unknown cluster 'skr-c'; did you mean "
        "'skr-b'? (clusters: kcp, skr-a, skr-b)",
    ),
    "no-type": (
        "            - first: {object: {cluster: skr-a, name: x}}" + W,
        AT.format(col=31) + "first.object: select objects by resource, or by apiVersion and kind",
    ),
    "both-types": (
        f"            - first: {{object: {VWC[:-1]}, resource: kymas}}}}" + W,
        "first.object: give resource or apiVersion + kind, not both",
    ),
    "unknown-change": (
        "            - first: {object: {cluster: skr-a, resource: kymas, change: created}}" + W,
        AT.format(col=73) + "first.object.change: a string 'created' is not allowed; expected "
        "'added', 'modified' or 'deleted'; did you mean 'deleted'?",
    ),
    "empty-change-list": (
        "            - first: {object: {cluster: skr-a, resource: kymas, change: []}}" + W,
        AT.format(col=31) + "first.object: change: give one change or a non-empty list of them",
    ),
    "bad-jmespath": (
        "            - first: {object: {cluster: skr-a, resource: kymas, match: {'(a[?)': 1}}}" + W,
        AT.format(col=31) + "first.object: match.(a[?): invalid JMESPath 'a[?'",
    ),
    "unknown-kyma": (
        "            - first: {reconcile: {kyma: kyma-skr-c}}" + W,
        AT.format(col=41) + "first.reconcile.kyma: unknown KCP Kyma 'kyma-skr-c'; did you mean "
        "'kyma-skr-b'? (KCP Kymas: kyma-skr-a, kyma-skr-b)",
    ),
    "unknown-outcome-in-list": (
        "            - first: {reconcile: {kyma: kyma-skr-a, outcome: [success, failed]}}" + W,
        AT.format(col=72) + "first.reconcile.outcome[1]: a string 'failed' is not allowed",
    ),
    "unknown-manager": (
        "            - first: {event: {manager: lifecycle-manger}}" + W,
        AT.format(col=40) + "first.event.manager: unknown manager 'lifecycle-manger'; did you "
        "mean 'lifecycle-manager'?",
    ),
    "event-from-kcp": (
        "            - first: {event: {cluster: kcp}}" + W,
        AT.format(col=40) + "first.event.cluster: 'kcp' is not an SKR here",
    ),
    "event-cluster-and-runtime-id": (
        "            - first: {event: {cluster: skr-a, runtimeId: runtime-skr-b}}" + W,
        AT.format(col=58) + "first.event.runtimeId: SKR 'skr-a' has runtime id "
        "'runtime-skr-a', not 'runtime-skr-b'; give cluster or runtimeId, not both",
    ),
    "unknown-runtime-id": (
        "            - first: {event: {runtimeId: runtime-skr-c}}" + W,
        AT.format(col=42) + "first.event.runtimeId: unknown runtime id 'runtime-skr-c'",
    ),
    "unknown-step": (
        "            - first: {step: {name: y}}" + W,
        AT.format(col=36) + "first.step.name: unknown step 'y'; steps: x",
    ),
    "unknown-phase": (
        "            - first: {step: {name: x, phase: middle}}" + W,
        AT.format(col=46) + "first.step.phase: a string 'middle' is not allowed; expected "
        "'start' or 'end'",
    ),
    "unknown-fault-target": (
        "            - first: {fault: {target: webhook/skr-z}}" + W,
        AT.format(col=39) + "first.fault.target: unknown SKR 'skr-z'; did you mean 'skr-b'?",
    ),
    "malformed-fault-target": (
        "            - first: {fault: {target: envoy}}" + W,
        AT.format(col=39) + "first.fault.target: a string 'envoy' is not gateway, kcp, "
        "certificates, listener/<component>, webhook/<skr> or apiserver/<cluster>",
    ),
    "unknown-write-cluster": (
        "            - first: {write: {}}\n              then: {write: {cluster: skr-z}}\n",
        "s.yaml:9:39: step 'x', try[0].expect.timeline[0].then.write.cluster: unknown cluster "
        "'skr-z'",
    ),
    "zero-within": (
        "            - first: {write: {}}" + W + "              within: 0s\n",
        "s.yaml:10:23: step 'x', try[0].expect.timeline[0].within: duration must be greater than 0",
    ),
    "unknown-since": (
        "            - first: {write: {}}" + W + "              since: step\n",
        "s.yaml:10:22: step 'x', try[0].expect.timeline[0].since: a string 'step' is not "
        "allowed; expected 'window' or 'run'",
    ),
    "missing-then": (
        "            - first: {write: {}}\n",
        "s.yaml:8:15: missing key 'then' in step 'x', try[0].expect.timeline[0]",
    ),
    "then-misspelled": (
        "            - first: {write: {}}\n              thne: {write: {}}\n",
        "s.yaml:9:15: unknown key 'thne' in step 'x', try[0].expect.timeline[0]; "
        "did you mean 'then'?",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_located_error(case: str) -> None:
    body, expected = CASES[case]
    with pytest.raises(InvalidScenario) as caught:
        loads_scenario(HEAD + body, source="s.yaml")
    lines = [e.line() for e in caught.value.errors]
    assert any(line.startswith(expected) or expected in line for line in lines), lines
    assert all(line.startswith("s.yaml:") for line in lines), lines


FULL = """\
name: s
clusters: {skrs: [{name: skr-a, kyma: false}]}
steps:
  - name: create
    try:
      - apply:
          cluster: kcp
          object: {apiVersion: operator.kyma-project.io/v1beta2, kind: Kyma,
                   metadata: {name: kyma-skr-a, namespace: kcp-system}}
      - expect:
          within: 15s
          timeline:
            - first: {object: {cluster: skr-a, resource: kymas, namespace: kyma-system,
                               name: default, change: added}}
              then: {object: {cluster: skr-a, apiVersion: admissionregistration.k8s.io/v1,
                              kind: ValidatingWebhookConfiguration, name: skr-webhook,
                              change: [added, modified], match: {webhooks: [{name: x}]}}}
            - first: {reconcile: {kyma: kyma-skr-a, trigger: requeue-timer}}
              then: {object: {cluster: kcp, resource: secrets, namespace: istio-system,
                              name: kyma-skr-a-webhook-tls, change: modified}}
              within: 8s
            - first: {step: {name: create}}
              then: {event: {manager: lifecycle-manager, cluster: skr-a,
                             object: {namespace: kyma-system, name: default, kind: Kyma}}}
              since: run
            - first: {write: {cluster: kcp, name: kyma-skr-a}}
              then: {reconcile: {kyma: kcp-system/kyma-skr-a, outcome: [success, warning]}}
            - first: {fault: {target: gateway, action: stop}}
              then: {object: {cluster: skr-a, resource: kymas, namespace: kyma-system,
                              match: {(metadata.name): default}}}
"""


def test_the_documented_shapes_load_and_describe_themselves() -> None:
    scenario = loads_scenario(FULL, source="s.yaml")
    expect = scenario.steps[0].try_[1].expect  # type: ignore[union-attr]
    entries = expect.timeline
    assert [e.first.key + ">" + e.then.key for e in entries] == [
        "object>object",
        "reconcile>object",
        "step>event",
        "write>reconcile",
        "fault>object",
    ]
    assert entries[0].describe() == (
        "kymas kyma-system/default added on skr-a, then ValidatingWebhookConfiguration "
        "skr-webhook added|modified on skr-a (matching)"
    )
    assert entries[1].within == 8.0 and entries[2].since == "run"
    assert entries[3].then.reconcile is not None
    assert entries[3].then.reconcile.outcomes == {"success", "warning"}


def test_one_watch_per_cluster_type_and_namespace_keeping_what_match_reads() -> None:
    scenario = loads_scenario(FULL, source="s.yaml")
    entries = scenario.steps[0].try_[1].expect.timeline  # type: ignore[union-attr]
    watches = object_watches(entries)
    kymas = ResourceRef(group="operator.kyma-project.io", version="v1beta2", resource="kymas")
    vwc = ObjectWatch(
        "skr-a",
        api_version="admissionregistration.k8s.io/v1",
        kind="ValidatingWebhookConfiguration",
    )
    assert watches == (
        ObjectWatch("skr-a", kymas, namespace="kyma-system"),
        vwc,
        ObjectWatch("kcp", ResourceRef(version="v1", resource="secrets"), namespace="istio-system"),
    )
    assert [w.key for w in watches] == [
        "skr-a:operator.kyma-project.io/v1beta2/kymas:kyma-system",
        "skr-a:admissionregistration.k8s.io/v1/ValidatingWebhookConfiguration",
        "kcp:v1/secrets:istio-system",
    ]
    assert kept_keys(entries, vwc) == frozenset({"webhooks"})
    assert kept_keys(entries, watches[0]) is None  # a top-level expression reads anything
    assert kept_keys(entries, watches[2]) == frozenset()  # a Secret's data is not kept


def test_expect_may_hold_only_a_timeline_and_says_so_when_empty() -> None:
    with pytest.raises(InvalidScenario) as caught:
        loads_scenario(HEAD.replace("          timeline:\n", "          within: 1s\n"))
    assert "metrics, latency, writes, timeline" in str(caught.value)
