"""Located validation errors for assert / error / script / collect, apiserver metrics,
reconcile outcomes and Watcher manager labels: one line each, file:line:column."""

from __future__ import annotations

import pytest

from harness.scenario import InvalidScenario, loads_scenario

HEAD = "name: s\nclusters: {skrs: [{name: skr-a}, {name: skr-b}]}\nsteps:\n  - name: x\n    try:\n"
VWC = "apiVersion: admissionregistration.k8s.io/v1, kind: ValidatingWebhookConfiguration"

CASES = {
    "assert-unknown-cluster": (
        f"      - assert: {{cluster: skr-c, {VWC}}}\n",
        "s.yaml:6:27: step 'x', try[0].assert.cluster: unknown cluster 'skr-c'; "
        "did you mean 'skr-b'? (clusters: kcp, skr-a, skr-b)",
    ),
    "assert-bad-cluster-pattern": (
        f"      - assert: {{cluster: 'SKR A', {VWC}}}\n",
        "s.yaml:6:27: step 'x', try[0].assert.cluster: a string 'SKR A' is not a cluster "
        'name, or "*" for every SKR',
    ),
    "assert-no-type": (
        "      - assert: {cluster: skr-a, name: x}\n",
        "s.yaml:6:17: step 'x', try[0].assert: select objects by resource, or by "
        "apiVersion and kind",
    ),
    "assert-both-types": (
        f"      - assert: {{cluster: skr-a, resource: kymas, {VWC}}}\n",
        "s.yaml:6:17: step 'x', try[0].assert: give resource or apiVersion + kind, not both",
    ),
    "assert-bad-jmespath": (
        f"      - assert: {{cluster: skr-a, {VWC}, match: {{'(webhooks[?)': 1}}}}\n",
        "s.yaml:6:17: step 'x', try[0].assert: match.(webhooks[?): ",
    ),
    "assert-bad-any-order": (
        f"      - assert: {{cluster: skr-a, {VWC}, match: {{webhooks: {{$anyOrder: 1}}}}}}\n",
        "s.yaml:6:17: step 'x', try[0].assert: match.webhooks.$anyOrder: $anyOrder needs a list "
        "of items, got number",
    ),
    "assert-within-over-step": (
        f"      - assert: {{cluster: skr-a, {VWC}, within: 2m}}\n",
        "s.yaml:6:125: step 'x', try[0].assert.within: within 120s exceeds the step timeout "
        "60s; raise the step's timeout or shorten within",
    ),
    "error-unknown-key": (
        f"      - error: {{cluster: skr-a, {VWC}, mtach: {{}}}}\n",
        "unknown key 'mtach'",
    ),
    "script-empty": (
        "      - script: {command: '  '}\n",
        "s.yaml:6:17: step 'x', try[0].script: command must not be empty",
    ),
    "script-bad-regex": (
        "      - script: {command: 'true', expect: {stdout: {regex: '(unclosed'}}}\n",
        "try[0].script.expect.stdout: regex: ",
    ),
    "script-timeout-over-step": (
        "      - script: {command: 'true', timeout: 5m}\n",
        "s.yaml:6:44: step 'x', try[0].script.timeout: timeout 300s exceeds the step timeout 60s",
    ),
    "script-bad-exit-code": (
        "      - script: {command: 'true', expect: {exitCode: 300}}\n",
        "try[0].script.expect.exitCode",
    ),
    "collect-nothing": (
        "      - collect: {cluster: skr-a}\n",
        "s.yaml:6:18: step 'x', try[0].collect: collect needs objects (resource, or "
        "apiVersion + kind), events: true, or both",
    ),
    "metrics-apiserver-unknown-cluster": (
        "      - expect: {metrics: [{target: apiserver/skr-z, name: x_total, value: 1}]}\n",
        "try[0].expect.metrics[0].target: unknown cluster 'skr-z'",
    ),
    "metrics-quantile-not-apiserver": (
        "      - expect: {metrics: [{target: webhook/skr-a, name: x, quantile: 0.9, value: 1}]}\n",
        "quantile is for apiserver/<cluster> histograms",
    ),
    "reconciles-bad-outcome": (
        "      - expect: {reconciles: [{kyma: kyma-skr-a, outcome: failed}]}\n",
        "try[0].expect.reconciles[0].outcome",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_located_error(case: str) -> None:
    body, expected = CASES[case]
    with pytest.raises(InvalidScenario) as caught:
        loads_scenario(HEAD + body, source="s.yaml")
    lines = [e.line() for e in caught.value.errors]
    assert any(expected in line for line in lines), lines
    assert all(line.startswith("s.yaml:") for line in lines), lines


def test_watcher_without_manager_or_label_is_located() -> None:
    text = (
        "name: s\nclusters: {skrs: [{name: skr-a}]}\nwatchers:\n"
        "  - {name: w, resource: configmaps, service: {name: e, port: 8090}}\n"
        "listeners: [{component: m, service: {name: e, port: 8090}}]\n"
        "steps: [{name: x, try: [{wait: 1s}]}]\n"
    )
    with pytest.raises(InvalidScenario) as caught:
        loads_scenario(text, source="s.yaml")
    (line,) = [e.line() for e in caught.value.errors]
    assert line.startswith("s.yaml:4:")
    assert "empty and no label operator.kyma-project.io/managed-by gives the manager" in line


def test_every_new_construct_loads() -> None:
    text = HEAD + (
        f"      - assert: {{cluster: '*', {VWC}, name: skr-webhook,\n"
        "                  match: {(length(webhooks)): 1, webhooks: {$contains: [{name: a}]}}}\n"
        "      - error: {cluster: kcp, resource: kymas, namespace: kcp-system,\n"
        "                 selector: {a: b}}\n"
        "      - script: {command: [sh, -c, 'echo {}'], env: {A: b}, timeout: 5s,\n"
        "                 expect: {exitCode: 0, stdout: {json: {}, contains: ['{']}}}\n"
        "      - collect: {cluster: '*', events: true, namespace: kyma-system}\n"
        "      - expect:\n"
        "          metrics: [{target: apiserver/kcp, name: h, quantile: 0.5, op: '<', value: 1}]\n"
        "          reconciles: [{kyma: kyma-skr-a, outcome: warning, none: true}]\n"
    )
    scenario = loads_scenario(text, source="s.yaml")
    assert len(scenario.steps[0].try_) == 5
