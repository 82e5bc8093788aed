"""Property: any valid scenario survives YAML dump → load unchanged."""

from __future__ import annotations

from typing import Any

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.scenario import Scenario, dump_scenario, loads_scenario

SKR_NAMES = ["skr-a", "skr-b", "skr-c"]
# at most 5 s: an expect's within must fit in the step timeout (at least 10 s here)
durations = st.one_of(
    st.sampled_from(["500ms", "1s", "2s", "0.25s", "1.5s"]),
    st.integers(min_value=1, max_value=5),
    st.floats(min_value=0.1, max_value=5, allow_nan=False),
)
counts = st.one_of(
    st.none(),
    st.builds(lambda n: {"exactly": n}, st.integers(0, 5)),
    st.builds(lambda n: {"atLeast": n}, st.integers(0, 5)),
    st.builds(lambda a, b: {"atLeast": a, "atMost": a + b}, st.integers(0, 5), st.integers(0, 5)),
)


@st.composite
def skrs(draw: st.DrawFn) -> list[dict[str, Any]]:
    names = draw(st.lists(st.sampled_from(SKR_NAMES), min_size=1, max_size=3, unique=True))
    out = []
    for name in names:
        skr: dict[str, Any] = {"name": name}
        if draw(st.booleans()):
            skr["deliveryMode"] = draw(st.sampled_from(["async", "sync"]))
        if draw(st.booleans()):
            kind = draw(st.sampled_from(["none", "wrong-san", "expired", "foreign-ca"]))
            skr["certificate"] = {"override": kind}
        out.append(skr)
    return out


@st.composite
def operations(draw: st.DrawFn, clusters: list[str]) -> dict[str, Any]:
    skr = draw(st.sampled_from(clusters))
    cluster = draw(st.sampled_from(["kcp", *clusters]))
    kind = draw(st.sampled_from(["wait", "patch", "delete", "apply", "fault", "expect", "churn"]))
    if kind == "wait":
        return {"wait": draw(durations)}
    if kind == "patch":
        resource = draw(
            st.sampled_from(["kymas", "configmaps", {"version": "v1", "resource": "x"}])
        )
        patch = {"cluster": cluster, "resource": resource, "name": "default"}
        patch["patch"] = {"spec": {"n": draw(st.integers())}}
        if draw(st.booleans()):
            patch["subresource"] = "status"
        return {"patch": patch}
    if kind == "delete":
        return {
            "delete": {"cluster": cluster, "resource": "secrets", "namespace": "a", "name": "b"}
        }
    if kind == "apply":
        obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
        # "${{" opens a reference in the scenario language; data never holds it literally
        literal = st.text(max_size=5).filter(lambda text: "${{" not in text)
        obj["data"] = draw(st.dictionaries(st.sampled_from("abc"), literal))
        return {"apply": {"cluster": cluster, "object": obj}}
    if kind == "fault":
        return {
            "fault": draw(
                st.sampled_from(
                    [
                        {"action": "stop", "target": "gateway"},
                        {"action": "restart", "target": f"webhook/{skr}"},
                        {"action": "kill", "target": f"apiserver/{cluster}"},
                        {"action": "start", "target": "listener/lifecycle-manager"},
                        {"kcp": None},
                        {"kcp": {"delay": "100ms", "abortPercent": 50, "abortStatus": 503}},
                        {"rotate": "leaf", "clusters": [skr]},
                        {"rotate": "ca"},
                    ]
                )
            )
        }
    if kind == "churn":
        return {
            "churn": {
                "clusters": [skr],
                "kinds": draw(st.lists(st.sampled_from(["kymas", "configmaps"]), min_size=1)),
                "seed": draw(st.integers(0, 2**31)),
                "rate": draw(st.floats(min_value=0.5, max_value=100)),
                "duration": draw(durations),
                "labels": {"app": "demo"},
            }
        }
    event: dict[str, Any] = {"manager": "lifecycle-manager"}
    count = draw(counts)
    if count is not None:
        event["count"] = count
    elif draw(st.booleans()):
        event["none"] = True
    if draw(st.booleans()):
        event["cluster"] = skr
        event["object"] = {"namespace": "kyma-system", "name": "default"}
    expect: dict[str, Any] = {"within": draw(durations), "events": [event]}
    if draw(st.booleans()):
        expect["metrics"] = [
            {"target": f"webhook/{skr}", "name": "watcher_failed_kcp_total", "op": "<=", "value": 0}
        ]
    if draw(st.booleans()):
        expect["latency"] = {"p99": draw(durations)}
    if draw(st.booleans()):
        expect["reconciles"] = [{"kyma": f"kyma-{skr}", "trigger": "watch-event", "none": True}]
    return {"expect": expect}


@st.composite
def scenarios(draw: st.DrawFn) -> dict[str, Any]:
    clusters = draw(skrs())
    names = [c["name"] for c in clusters]
    steps = []
    for i in range(draw(st.integers(1, 3))):
        step: dict[str, Any] = {
            "name": f"step-{i}",
            "timeout": draw(st.sampled_from(["10s", 30, "1m"])),
            "try": draw(st.lists(operations(names), min_size=1, max_size=4)),
        }
        if draw(st.booleans()):
            step["finally"] = draw(st.lists(operations(names), max_size=2))
        steps.append(step)
    data: dict[str, Any] = {
        "name": draw(st.from_regex(r"\A[a-z][a-z0-9-]{0,20}[a-z0-9]\Z")),
        "description": draw(st.text(max_size=30)),
        "tags": draw(st.lists(st.sampled_from(["smoke", "fault", "churn"]), unique=True)),
        "clusters": {"skrs": clusters},
        "steps": steps,
    }
    if draw(st.booleans()):
        data["settings"] = {
            "sanPinning": draw(st.booleans()),
            "requeue": {"error": draw(durations)},
        }
    if draw(st.booleans()):
        data["backend"] = draw(st.sampled_from(["local", "kubeconfig", "kind"]))
    # truth needs a churn before it: add both at the end, sometimes
    if draw(st.booleans()):
        steps[-1]["try"] += [{"churn": {"clusters": names}}, {"expect": {"truth": {}}}]
    return data


@settings(max_examples=150, deadline=None)
@given(scenarios())
def test_dump_then_load_gives_the_same_scenario(data: dict[str, Any]) -> None:
    scenario = Scenario.model_validate(data)
    # compared by content: a loaded scenario also remembers its source
    assert loads_scenario(yaml.safe_dump(data)).model_dump() == scenario.model_dump()
    again = loads_scenario(dump_scenario(scenario), source="again.yaml")
    assert again.model_dump() == scenario.model_dump()
    assert again.source == "again.yaml" and scenario.source is None
