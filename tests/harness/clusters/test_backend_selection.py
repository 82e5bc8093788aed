"""Choosing the cluster backend: command line over environment over the scenario file."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.clusters.backends import unsupported_reason
from harness.clusters.selection import (
    BackendChoice,
    BackendOverride,
    BackendSelectionError,
    ClusterTarget,
    choose_backend,
    parse_contexts,
)


def test_the_file_decides_when_nothing_else_is_said() -> None:
    assert choose_backend("local", env={}) == BackendChoice("local")
    assert choose_backend("kind", env={}).name == "kind"


def test_the_environment_overrides_the_file_and_the_command_line_overrides_both() -> None:
    env = {"WATCHER_HARNESS_BACKEND": "kind"}
    assert choose_backend("local", env=env).name == "kind"
    assert choose_backend("local", env=env, override=BackendOverride(name="local")).name == "local"


def test_kubeconfig_files_and_contexts_from_the_environment() -> None:
    env = {
        "WATCHER_HARNESS_BACKEND": "kubeconfig",
        "WATCHER_HARNESS_KUBECONFIG": "/a/kcp.yaml:/b/skrs.yaml",
        "WATCHER_HARNESS_CONTEXTS": "kcp=admin@kcp-dev, skr-a=arn:aws:eks:eu:1:cluster/skr",
        "WATCHER_HARNESS_RUN_ID": "ci-42",
        "KUBECONFIG": "/ignored",
    }
    choice = choose_backend("local", env=env)
    assert choice.run_id == "ci-42"
    assert choice.target("kcp") == ClusterTarget(
        (Path("/a/kcp.yaml"), Path("/b/skrs.yaml")), "admin@kcp-dev"
    )
    assert choice.target("skr-a").context == "arn:aws:eks:eu:1:cluster/skr"
    assert choice.target("skr-b").context == "skr-b"  # default: named like the cluster


def test_kubeconfig_falls_back_to_KUBECONFIG_then_the_home_file() -> None:
    env = {"KUBECONFIG": "/x/one:/x/two"}
    override = BackendOverride(name="kubeconfig")
    assert choose_backend("local", env=env, override=override).kubeconfigs == (
        Path("/x/one"),
        Path("/x/two"),
    )
    home = choose_backend("local", env={}, override=override).kubeconfigs
    assert home == (Path("~/.kube/config").expanduser(),)
    given = BackendOverride(name="kubeconfig", kubeconfig="/cli.yaml", contexts="kcp=k")
    choice = choose_backend("local", env={"WATCHER_HARNESS_CONTEXTS": "kcp=env"}, override=given)
    assert choice.target("kcp") == ClusterTarget((Path("/cli.yaml"),), "k")


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"WATCHER_HARNESS_BACKEND": "minikube"}, "WATCHER_HARNESS_BACKEND: unknown cluster "
         "backend 'minikube'; use one of: local, kubeconfig, kind"),
        ({"WATCHER_HARNESS_BACKEND": "kubeconfig", "WATCHER_HARNESS_CONTEXTS": "kcp"},
         "WATCHER_HARNESS_CONTEXTS: 'kcp' is not CLUSTER=CONTEXT"),
    ],
)  # fmt: skip
def test_bad_selections_say_where_and_what(env: dict[str, str], message: str) -> None:
    with pytest.raises(BackendSelectionError) as info:
        choose_backend("local", env=env)
    assert str(info.value) == message


def test_parse_contexts_skips_empty_parts() -> None:
    assert parse_contexts("kcp=a,, skr-a = b ,", "x") == {"kcp": "a", "skr-a": "b"}


def test_only_the_local_backend_can_stop_api_servers() -> None:
    targets = ["gateway", "webhook/skr-a", "apiserver/kcp", "apiserver/skr-a"]
    assert unsupported_reason(BackendChoice("local"), targets) is None
    assert unsupported_reason(BackendChoice("kubeconfig"), targets[:2]) is None
    reason = unsupported_reason(BackendChoice("kubeconfig"), targets)
    assert reason is not None
    assert reason.startswith("the kubeconfig backend does not own the clusters' API server")
    assert "(fault targets: apiserver/kcp, apiserver/skr-a)" in reason


def test_a_webhook_command_comes_from_the_command_line_over_the_environment() -> None:
    env = {"WATCHER_HARNESS_WEBHOOK_COMMAND": "/opt/webhook --v=2 'a b'"}
    assert choose_backend("local", env=env).webhook_command == ("/opt/webhook", "--v=2", "a b")
    override = BackendOverride(webhook_command="other")
    assert choose_backend("local", env=env, override=override).webhook_command == ("other",)
    assert choose_backend("local", env={}).webhook_command == ()
    assert choose_backend("local", env={}).webhook_isolation == "netns"
    none = {"WATCHER_HARNESS_WEBHOOK_ISOLATION": "none"}
    assert choose_backend("local", env=none).webhook_isolation == "none"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"WATCHER_HARNESS_WEBHOOK_COMMAND": "webhook 'unclosed"}, "is not a command line"),
        ({"WATCHER_HARNESS_WEBHOOK_ISOLATION": "chroot"}, "unknown isolation 'chroot'"),
        (
            {
                "WATCHER_HARNESS_BACKEND": "kind",
                "WATCHER_HARNESS_WEBHOOK_MODE": "in-cluster",
                "WATCHER_HARNESS_WEBHOOK_COMMAND": "webhook",
            },
            "cannot be combined with webhook mode in-cluster",
        ),
    ],
)
def test_bad_webhook_commands_say_what_is_wrong(env: dict[str, str], message: str) -> None:
    with pytest.raises(BackendSelectionError, match=message):
        choose_backend("local", env=env)


def test_a_klm_command_comes_from_the_command_line_over_the_environment(tmp_path: Path) -> None:
    env = {"WATCHER_HARNESS_KLM_COMMAND": "/opt/klm/bin/manager --oci-registry-host=r"}
    choice = choose_backend("local", env=env)
    assert choice.klm_command == ("/opt/klm/bin/manager", "--oci-registry-host=r")
    assert choice.klm_crds is None
    override = BackendOverride(klm_command="other", klm_crds=str(tmp_path))
    choice = choose_backend("local", env=env, override=override)
    assert (choice.klm_command, choice.klm_crds) == (("other",), tmp_path)
    assert choose_backend("local", env={}).klm_command == ()


def test_a_klm_crd_folder_must_exist(tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    with pytest.raises(BackendSelectionError, match=f"KLM CRDs: {missing} is not a folder"):
        choose_backend("local", env={"WATCHER_HARNESS_KLM_CRDS": str(missing)})
    with pytest.raises(BackendSelectionError, match=r"--klm-command: .* is not a command line"):
        choose_backend("local", env={}, override=BackendOverride(klm_command="'open"))
