"""Located errors of the second-round constructs: ``capture``, ``set``, ``count`` on
``assert``, reconcile outcome lists, ``script`` polling, references in keys."""

from __future__ import annotations

import pytest

from harness.scenario import AssertOp, InvalidScenario, ScriptOp, SetOp, loads_scenario

HEAD = "name: demo\nclusters:\n  skrs: [{name: skr-a}]\nsteps:\n  - name: x\n    try:\n"
# HEAD is six lines: the first operation is on line 7.
SECRET = "cluster: kcp, resource: secrets, namespace: istio-system, name: s"


def errors(ops: str) -> list[str]:
    with pytest.raises(InvalidScenario) as info:
        loads_scenario(HEAD + ops, source="s.yaml")
    return [e.line() for e in info.value.errors]


CASES = {
    "capture-bad-jmespath": (
        f"      - assert: {{{SECRET}, capture: {{c: 'data.['}}}}\n",
        "s.yaml:7:17: step 'x', try[0].assert: capture.c: invalid JMESPath 'data.[':",
    ),
    "capture-every-skr": (
        "      - assert: {cluster: '*', resource: secrets, capture: {c: metadata.name}}\n",
        "s.yaml:7:17: step 'x', try[0].assert: capture needs one cluster, not \"*\"",
    ),
    "capture-with-count-zero": (
        f"      - assert: {{{SECRET}, count: {{exactly: 0}}, capture: {{c: metadata.name}}}}\n",
        "s.yaml:7:17: step 'x', try[0].assert: capture needs a matching object",
    ),
    "count-on-error": (
        f"      - error: {{{SECRET}, count: {{exactly: 1}}}}\n",
        "s.yaml:7:9: step 'x', try[0]: error holds when no object matches; count is for assert",
    ),
    "capture-on-error": (
        f"      - error: {{{SECRET}, capture: {{c: metadata.name}}}}\n",
        "s.yaml:7:9: step 'x', try[0]: error matches no object, so it has nothing to capture",
    ),
    "count-malformed": (
        f"      - assert: {{{SECRET}, count: {{exactly: 1, atMost: 2}}}}\n",
        "s.yaml:7:92: step 'x', try[0].assert.count: exactly cannot be combined",
    ),
    "capture-shadows-binding": (
        "      - set: {runId: 1}\n",
        "s.yaml:7:14: step 'x', try[0].set: 'runId' is already a binding",
    ),
    "unknown-captured-name": (
        "      - set: {first: 1}\n      - set: {second: '${{ frist }}'}\n",
        "s.yaml:8:23: step 'x', try[1].set.second: unknown binding 'frist'; did you mean 'first'?",
    ),
    "unknown-name-in-a-key": (
        f"      - assert: {{{SECRET}, match: {{data: {{'${{{{ nmae }}}}': x}}}}}}\n",
        "unknown binding 'nmae'",
    ),
    "empty-set": (
        "      - set: {}\n",
        "s.yaml:7:14: step 'x', try[0].set: ",
    ),
    "outcome-unknown": (
        "      - expect: {reconciles: [{kyma: kyma-skr-a, outcome: [error, broken]}]}\n",
        "s.yaml:7:67: step 'x', try[0].expect.reconciles[0].outcome[1]: "
        "a string 'broken' is not allowed",
    ),
    "interval-without-within": (
        "      - script: {command: 'true', interval: 1s}\n",
        "s.yaml:7:17: step 'x', try[0].script: interval is for polling: give within too",
    ),
    "script-within-over-step-timeout": (
        "      - script: {command: 'true', within: 2m}\n",
        "s.yaml:7:43: step 'x', try[0].script.within: within 120s exceeds the step timeout 60s",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_located_error(case: str) -> None:
    ops, expected = CASES[case]
    found = errors(ops)
    assert any(expected in line for line in found), found


def test_constructs_load_and_keep_run_time_references() -> None:
    scenario = loads_scenario(
        HEAD
        + f"      - assert: {{{SECRET}, count: {{atLeast: 1}}, "
        + "capture: {cert: 'data.\"tls.crt\"'}}\n"
        + "      - set: {pair: '${{ cert }}/${{ runId }}', n: 3}\n"
        + "      - assert: {cluster: skr-a, resource: secrets, match: {data: {'${{ cert }}': x}}}\n"
        + "      - script: {command: '${{ harness.get }} --cluster kcp kymas', within: 5s, "
        + "interval: 200ms, capture: {gen: metadata.generation}}\n"
        + "      - expect: {reconciles: [{kyma: kyma-skr-a, outcome: [error, warning]}]}\n",
        source="s.yaml",
    )
    ops = scenario.steps[0].try_
    assert isinstance(ops[0], AssertOp) and ops[0].assert_.bounds == (1, None)
    assert isinstance(ops[1], SetOp) and ops[1].set_ == {"pair": "${{ cert }}/${{ runId }}", "n": 3}
    assert isinstance(ops[2], AssertOp) and "${{ cert }}" in ops[2].assert_.match["data"]
    assert isinstance(ops[3], ScriptOp) and ops[3].script.within == 5.0
    assert ops[3].script.interval == 0.2


def test_load_time_bindings_fill_keys() -> None:
    scenario = loads_scenario(
        "name: demo\nclusters: {skrs: [{name: skr-a}]}\nbindings: {key: app}\nsteps:\n"
        "  - name: x\n    try:\n"
        "      - assert: {cluster: kcp, resource: secrets, match: {metadata: {labels: "
        "{'${{ key }}.kyma-project.io/name': v}}}}\n",
        source="s.yaml",
    )
    op = scenario.steps[0].try_[0]
    assert isinstance(op, AssertOp)
    assert op.assert_.match == {"metadata": {"labels": {"app.kyma-project.io/name": "v"}}}
