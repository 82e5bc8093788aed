"""Every kind of mistake gives one exact ``file:line:column: what; hint`` line."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import HarnessError
from harness.scenario import InvalidScenario, ScenarioError, load_scenario, loads_scenario

HEAD = """\
name: demo
clusters:
  skrs:
    - name: skr-a
    - name: skr-b
"""
# HEAD is five lines: a step list starts on line 6.


def errors(text: str) -> list[str]:
    with pytest.raises(InvalidScenario) as info:
        loads_scenario(text, source="s.yaml")
    return [e.line() for e in info.value.errors]


CASES = {
    "yaml-syntax": (
        "name: demo\nsteps: [\n  - x\n",
        [
            "s.yaml:3:3: YAML syntax error: expected the node content, but found '-'; "
            "while parsing a flow node"
        ],
    ),
    "unknown-step-key": (
        HEAD + "steps:\n  - name: x\n    tyr: [{wait: 1s}]\n",
        [
            "s.yaml:7:5: missing key 'try' in step 'x'",
            "s.yaml:8:5: unknown key 'tyr' in step 'x'; did you mean 'try'?",
        ],
    ),
    "unknown-top-key": (
        HEAD + "step:\n  - name: x\n    try: [{wait: 1s}]\n",
        [
            "s.yaml:1:1: missing key 'steps' in the scenario",
            "s.yaml:6:1: unknown key 'step' in the scenario; did you mean 'steps'?",
        ],
    ),
    "operation-at-step-level": (
        HEAD + "steps:\n  - name: x\n    try: [{wait: 1s}]\n    wait: 1s\n",
        [
            "s.yaml:9:5: unknown key 'wait' in step 'x'; operations go in a list under try, "
            "catch or finally: try: [{wait: ...}]"
        ],
    ),
    "wrong-type": (
        HEAD + "steps:\n  - name: x\n    try: [{wait: 1s}]\n    timeout: [1]\n",
        [
            "s.yaml:9:14: step 'x', timeout: invalid duration [1]; write a number of seconds or a "
            "number with a unit: 500ms, 2s, 1.5m, 1h, 1m30s"
        ],
    ),
    "wrong-scalar-type": (
        HEAD.replace("    - name: skr-b\n", "") + "settings: {sanPinning: maybe}\n"
        "steps:\n  - name: x\n    try: [{wait: 1s}]\n",
        ["s.yaml:5:24: settings.sanPinning: expected true or false, got a string 'maybe'"],
    ),
    "enum-typo": (
        HEAD.replace("    - name: skr-b\n", "    - name: skr-b\n      deliveryMode: snyc\n")
        + "steps:\n  - name: x\n    try: [{wait: 1s}]\n",
        [
            "s.yaml:6:21: SKR 'skr-b', deliveryMode: a string 'snyc' is not allowed; expected "
            "'async' or 'sync'; did you mean 'sync'? (allowed: async, sync)"
        ],
    ),
    "unknown-operation": (
        HEAD + "steps:\n  - name: x\n    try:\n      - aply: {cluster: kcp}\n",
        [
            "s.yaml:9:9: step 'x', try[0]: unknown operation 'aply'; did you mean 'apply'? "
            "(operations: apply, patch, delete, churn, fault, wait, expect, watcher, request, "
            "assert, error, script, collect, set)"
        ],
    ),
    "two-operations-in-one-item": (
        HEAD + "steps:\n  - name: x\n    try:\n      - wait: 1s\n        expect: {}\n",
        [
            "s.yaml:9:9: step 'x', try[0]: an operation is a mapping with exactly one key; got "
            "keys 'wait', 'expect'; one of apply, patch, delete, churn, fault, wait, expect, "
            "watcher, request, assert, error, script, collect, set; put each operation in its own "
            "list item"
        ],
    ),
    "unknown-nested-key": (
        HEAD + "steps:\n  - name: x\n    try:\n      - patch:\n          clustr: skr-a\n",
        # a block mapping starts at its first key: missing keys point there
        [
            "s.yaml:10:11: missing key 'cluster' in step 'x', try[0].patch",
            "s.yaml:10:11: missing key 'resource' in step 'x', try[0].patch",
            "s.yaml:10:11: missing key 'name' in step 'x', try[0].patch",
            "s.yaml:10:11: missing key 'patch' in step 'x', try[0].patch",
            "s.yaml:10:11: unknown key 'clustr' in step 'x', try[0].patch; did you mean 'cluster'?",
        ],
    ),
    "unknown-cluster": (
        HEAD + "steps:\n  - name: x\n    try:\n      - delete: {cluster: skr-c, "
        "resource: kymas, name: default}\n",
        [
            "s.yaml:9:27: step 'x', try[0].delete.cluster: unknown cluster 'skr-c'; did you mean "
            "'skr-b'? (clusters: kcp, skr-a, skr-b)"
        ],
    ),
    "churn-on-kcp": (
        HEAD + "steps:\n  - name: x\n    try:\n      - churn: {clusters: [skr-a, kcp]}\n",
        [
            "s.yaml:9:35: step 'x', try[0].churn.clusters[1]: 'kcp' is not an SKR here; SKRs: "
            "skr-a, skr-b"
        ],
    ),
    "unknown-listener-target": (
        HEAD + "steps:\n  - name: x\n    try:\n      - fault: {action: stop, "
        "target: listener/klm}\n",
        [
            "s.yaml:9:39: step 'x', try[0].fault.target: unknown listener 'klm'; listeners: "
            "lifecycle-manager"
        ],
    ),
    "listener-cannot-be-killed": (
        HEAD + "steps:\n  - name: x\n    try:\n      - fault: {action: kill, "
        "target: listener/lifecycle-manager}\n",
        [
            "s.yaml:9:16: step 'x', try[0].fault: unknown action 'kill' for "
            "'listener/lifecycle-manager'; use one of: stop, start, restart"
        ],
    ),
    "unknown-webhook-target": (
        HEAD + "steps:\n  - name: x\n    try:\n      - fault: {action: stop, "
        "target: webhook/skr-z}\n",
        [
            "s.yaml:9:39: step 'x', try[0].fault.target: unknown SKR 'skr-z'; did you mean "
            "'skr-b'? (SKRs: skr-a, skr-b)"
        ],
    ),
    "bad-fault-target": (
        HEAD + "steps:\n  - name: x\n    try:\n      - fault: {action: stop, target: envoy}\n",
        [
            "s.yaml:9:39: step 'x', try[0].fault.target: a string 'envoy' is not gateway, "
            "listener/<component>, webhook/<skr> or apiserver/<cluster>"
        ],
    ),
    "unknown-manager": (
        HEAD + "steps:\n  - name: x\n    try:\n      - expect:\n          events:\n"
        "            - {manager: lifecycle-managr}\n",
        [
            "s.yaml:11:25: step 'x', try[0].expect.events[0].manager: unknown manager "
            "'lifecycle-managr'; did you mean 'lifecycle-manager'? (managers: lifecycle-manager)"
        ],
    ),
    "unknown-kyma": (
        HEAD + "steps:\n  - name: x\n    try:\n      - expect:\n          reconciles:\n"
        "            - {kyma: kyma-skr-c, none: true}\n",
        [
            "s.yaml:11:22: step 'x', try[0].expect.reconciles[0].kyma: unknown KCP Kyma "
            "'kyma-skr-c'; did you mean 'kyma-skr-b'? (KCP Kymas: kyma-skr-a, kyma-skr-b)"
        ],
    ),
    "within-exceeds-step-timeout": (
        HEAD + "steps:\n  - name: x\n    timeout: 5s\n    try:\n      - expect:\n"
        "          within: 10s\n          metrics: [{target: gateway, name: up, value: 1}]\n",
        [
            "s.yaml:11:19: step 'x', try[0].expect.within: within 10s exceeds the step timeout 5s;"
            " raise the step's timeout or shorten within"
        ],
    ),
    "duplicate-step": (
        HEAD + "steps:\n  - name: x\n    try: [{wait: 1s}]\n  - name: x\n    try: [{wait: 1s}]\n",
        ["s.yaml:9:11: step 'x', name: duplicate step 'x'; step names must be unique"],
    ),
    "duplicate-skr": (
        HEAD.replace("skr-b", "skr-a") + "steps:\n  - name: x\n    try: [{wait: 1s}]\n",
        # runtimeId is not written: the SKR's mapping is pointed at
        [
            "s.yaml:5:7: SKR 'skr-a', runtimeId: duplicate runtime id 'runtime-skr-a'; runtime id "
            "names must be unique",
            "s.yaml:5:13: SKR 'skr-a', name: duplicate SKR 'skr-a'; SKR names must be unique",
        ],
    ),
    "duplicate-yaml-key": (
        HEAD + "steps:\n  - name: x\n    name: y\n    try: [{wait: 1s}]\n",
        ["s.yaml:8:5: duplicate key 'name'; first given on line 7; remove one"],
    ),
    "unknown-watcher-deleted": (
        HEAD + "steps:\n  - name: x\n    try:\n      - watcher: {delete: klm}\n",
        [
            "s.yaml:9:27: step 'x', try[0].watcher.delete: unknown Watcher 'klm'; Watchers: "
            "klm-watcher"
        ],
    ),
    "watcher-service-without-listener": (
        HEAD + "watchers:\n  - name: w\n    manager: m\n    resource: configmaps\n"
        "    service: {name: m-events, port: 9000}\n"
        "steps:\n  - name: x\n    try: [{wait: 1s}]\n",
        [
            "s.yaml:10:14: Watcher 'w', service: no listener serves m-events.kcp-system:9000; "
            "add it under listeners, or use one of klm-controller-manager-events.kcp-system:8082"
        ],
    ),
    "truth-without-churn": (
        HEAD + "steps:\n  - name: x\n    try:\n      - expect: {truth: {}}\n",
        [
            "s.yaml:9:25: step 'x', try[0].expect.truth: truth compares events with the churn's "
            "record, but no churn runs before it; add a churn operation to this or an earlier step"
        ],
    ),
    "count-conflict": (
        HEAD + "steps:\n  - name: x\n    try:\n      - expect:\n          events:\n"
        "            - {manager: lifecycle-manager, count: {exactly: 1, atLeast: 1}}\n",
        [
            "s.yaml:11:51: step 'x', try[0].expect.events[0].count: exactly cannot be combined "
            "with atLeast or atMost"
        ],
    ),
    "break-nothing": (
        HEAD + "steps:\n  - name: x\n    try:\n"
        "      - fault: {certificate: none, clusters: [skr-a]}\n",
        [
            "s.yaml:9:16: step 'x', try[0].fault: certificate: none breaks nothing; "
            "use rotate: leaf to repair"
        ],
    ),
    "break-unknown-cluster": (
        HEAD + "steps:\n  - name: x\n    try:\n"
        "      - fault: {certificate: expired, clusters: [skr-c]}\n",
        [
            "s.yaml:9:50: step 'x', try[0].fault.clusters[0]: unknown SKR 'skr-c'; "
            "did you mean 'skr-b'? (SKRs: skr-a, skr-b)"
        ],
    ),
    "health-timeout-too-long": (
        HEAD + "settings:\n  klm:\n    health: {interval: 2s, timeout: 2s}\n"
        "steps:\n  - name: x\n    try: [{wait: 1s}]\n",
        ["s.yaml:8:13: settings.klm.health: timeout must be shorter than interval"],
    ),
    "health-listener-without-health": (
        HEAD + "steps:\n  - name: x\n    try:\n"
        "      - fault: {action: stop, target: listener/watcher-health}\n",
        [
            "s.yaml:9:39: step 'x', try[0].fault.target: no listener 'watcher-health': "
            "watcher health is off; turn it on: settings: {klm: {health: {interval: 10s, "
            "timeout: 2s}}}"
        ],
    ),
    "not-a-mapping": (
        "- name: x\n",
        ["s.yaml:1:1: a scenario is a mapping with name, clusters and steps; got a list"],
    ),
    "empty": (
        "",
        ["s.yaml:1:1: the file is empty; a scenario needs at least name, clusters and steps"],
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_located_error(case: str) -> None:
    text, expected = CASES[case]
    assert errors(text) == expected


def test_error_is_a_harness_error_with_location() -> None:
    with pytest.raises(InvalidScenario) as info:
        loads_scenario(HEAD + "steps:\n  - name: x\n    tyr: [{wait: 1s}]\n", source="s.yaml")
    exc = info.value
    assert isinstance(exc, HarnessError) and isinstance(exc, ScenarioError)
    assert (exc.location.file, exc.location.line, exc.location.column) == ("s.yaml", 7, 5)
    assert str(exc).count("\n") == 1  # two problems, one line each
    assert all("\n" not in str(e) for e in exc.errors)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InvalidScenario) as info:
        load_scenario(tmp_path / "nope.yaml")
    assert (
        str(info.value)
        == f"{tmp_path / 'nope.yaml'}: cannot read the file: No such file or directory"
    )


def test_apply_file_must_exist(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(
        HEAD + "steps:\n  - name: x\n    try:\n      - apply: {cluster: skr-a, file: cm.yaml}\n"
    )
    with pytest.raises(InvalidScenario) as info:
        load_scenario(path)
    assert str(info.value) == (
        f"{path}:9:39: step 'x', try[0].apply.file: file 'cm.yaml' not found; paths are "
        f"relative to the scenario's directory {tmp_path}"
    )
    (tmp_path / "cm.yaml").write_text("{}")
    assert load_scenario(path).name == "demo"
