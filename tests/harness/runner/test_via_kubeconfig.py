"""``python -m harness.runner.via_kubeconfig``: which clusters it starts, how it shards,
and how it reports what was left behind (no clusters needed)."""

from __future__ import annotations

from pathlib import Path

from harness.clusters.ownership import CLUSTER_SCOPED, NAMESPACED, Entry, Inventory
from harness.kube import NAMESPACES
from harness.runner.via_kubeconfig import cluster_names, leftovers, split

SCENARIO = "name: {name}\nclusters: {{skrs: [{skrs}]}}\nsteps: [{{name: a, try: [{{wait: 1}}]}}]\n"


def test_one_cluster_per_name_any_scenario_uses(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(SCENARIO.format(name="a", skrs="{name: skr-b}, {name: skr-a}"))
    (tmp_path / "b.yaml").write_text(SCENARIO.format(name="b", skrs="{name: skr-good}"))
    assert cluster_names([str(tmp_path)]) == ["kcp", "skr-a", "skr-b", "skr-good"]


def test_split_deals_round_robin_and_never_makes_empty_groups() -> None:
    files = [Path(f"{n}.yaml") for n in "abcde"]
    assert split(files, 2) == [[files[0], files[2], files[4]], [files[1], files[3]]]
    assert split(files[:1], 3) == [[files[0]]]
    assert split(files, 0) == [files]


def test_leftovers_name_cluster_kind_and_object_and_tell_ours_apart() -> None:
    configmaps = next(r for r in NAMESPACED if r.plural == "configmaps")
    webhooks = CLUSTER_SCOPED[0]
    before = {"kcp": Inventory({NAMESPACES: {"u0": Entry("", "default", False)}})}
    after = {
        "kcp": Inventory(
            {
                NAMESPACES: {
                    "u0": Entry("", "default", False),
                    "u1": Entry("", "kcp-system", True),
                },
                configmaps: {"u2": Entry("default", "someone-elses", False)},
                webhooks: {"u3": Entry("", "skr-webhook", True)},
            }
        )
    }
    assert leftovers(before, after) == [
        "kcp: Namespace kcp-system",
        "kcp: ValidatingWebhookConfiguration skr-webhook",
    ]
    assert "kcp: ConfigMap default/someone-elses" in leftovers(before, after, ours=False)
