"""The kind backend without Docker: its generated config, its exact command lines, and that
every cluster it created is deleted again — with a fake command runner."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
import yaml

from harness.clusters.kind import (
    GATEWAY_NODE_PORT,
    INSTALL_KIND,
    CommandResult,
    KindBackend,
    KindCommandFailed,
    KindCommands,
    KindUnavailable,
    PortMapping,
    cluster_config,
    kind_cluster_name,
    kind_config,
    preflight,
)
from harness.errors import ClusterError


class FakeRunner:
    """Records every command; answers from ``failing`` (argv prefix → exit code, output)."""

    def __init__(
        self,
        *,
        installed: Sequence[str] = ("kind", "docker"),
        failing: dict[tuple[str, ...], tuple[int, str]] | None = None,
    ) -> None:
        self.installed = set(installed)
        self.failing = failing or {}
        self.commands: list[list[str]] = []
        self.configs: dict[str, object] = {}

    def which(self, program: str) -> str | None:
        return f"/usr/bin/{program}" if program in self.installed else None

    async def run(self, argv: Sequence[str]) -> CommandResult:
        self.commands.append(list(argv))
        if "--config" in argv:  # keep what kind would have read
            name = argv[argv.index("--name") + 1]
            config = Path(argv[argv.index("--config") + 1])
            self.configs[name] = yaml.safe_load(config.read_text())  # noqa: ASYNC240 - tiny
        for prefix, (code, output) in self.failing.items():
            if tuple(argv[: len(prefix)]) == prefix:
                return CommandResult(tuple(argv), code, output)
        return CommandResult(tuple(argv), 0, "")


def test_the_kcp_node_maps_the_gateway_node_port_and_skrs_map_nothing() -> None:
    kcp = cluster_config("kcp", gateway_host_port=40443, node_image="kindest/node:v1.31.0")
    assert kcp == {
        "kind": "Cluster",
        "apiVersion": "kind.x-k8s.io/v1alpha4",
        "networking": {"apiServerAddress": "127.0.0.1"},
        "nodes": [
            {
                "role": "control-plane",
                "image": "kindest/node:v1.31.0",
                "extraPortMappings": [
                    {
                        "containerPort": GATEWAY_NODE_PORT,
                        "hostPort": 40443,
                        "listenAddress": "127.0.0.1",
                        "protocol": "TCP",
                    }
                ],
            }
        ],
    }
    assert cluster_config("skr-a")["nodes"] == [{"role": "control-plane"}]
    custom = kind_config(port_mappings=[PortMapping(80, 8080, "0.0.0.0")])
    assert custom["nodes"][0]["extraPortMappings"][0]["listenAddress"] == "0.0.0.0"


def test_command_lines() -> None:
    c = KindCommands(kind="/opt/kind", wait="60s")
    assert c.create("wh-r-kcp", Path("/t/kcp.yaml"), Path("/t/kcp.kubeconfig")) == [
        "/opt/kind", "create", "cluster", "--name", "wh-r-kcp", "--config", "/t/kcp.yaml",
        "--kubeconfig", "/t/kcp.kubeconfig", "--wait", "60s",
    ]  # fmt: skip
    assert c.load_image("watcher:dev", "wh-r-skr-a") == [
        "/opt/kind", "load", "docker-image", "watcher:dev", "--name", "wh-r-skr-a",
    ]  # fmt: skip
    assert c.delete("wh-r-kcp", Path("/t/k")) == [
        "/opt/kind", "delete", "cluster", "--name", "wh-r-kcp", "--kubeconfig", "/t/k",
    ]  # fmt: skip
    assert KindCommands().docker_info() == ["docker", "info", "--format", "{{.ServerVersion}}"]


def test_kind_cluster_names_are_short_dns_labels() -> None:
    assert kind_cluster_name("20261122-073000-ab12", "skr-a") == "wh-1122-073000-ab12-skr-a"
    long = kind_cluster_name("R" * 80, "skr-with-a-rather-long-name-indeed-yes")
    assert len(long) <= 50 and long == long.lower() and not long.endswith("-")


async def test_missing_kind_is_one_line_saying_what_to_install() -> None:
    runner = FakeRunner(installed=("docker",))
    with pytest.raises(KindUnavailable) as info:
        await preflight(runner)
    assert str(info.value) == INSTALL_KIND and "\n" not in INSTALL_KIND
    assert runner.commands == []  # nothing was run


async def test_no_docker_engine_names_the_docker_error() -> None:
    runner = FakeRunner(
        failing={("docker", "info"): (1, "warning\nCannot connect to the Docker daemon at unix:///var/run/docker.sock")}
    )  # fmt: skip
    with pytest.raises(KindUnavailable) as info:
        await preflight(runner)
    message = str(info.value)
    assert "needs a running Docker engine (`docker info` failed: Cannot connect to the" in message
    assert "\n" not in message
    assert runner.commands == [["docker", "info", "--format", "{{.ServerVersion}}"]]
    with pytest.raises(KindUnavailable, match="no `docker` on PATH"):
        await preflight(FakeRunner(installed=("kind",)))


async def test_a_failed_start_deletes_every_cluster_it_created_also_the_half_made_one() -> None:
    runner = FakeRunner(
        failing={("kind", "create", "cluster", "--name", "wh-r1-skr-a"): (1, "boom")}
    )
    backend = KindBackend(run_id="r1", runner=runner, image="watcher:dev")
    with pytest.raises(KindCommandFailed, match="exited 1:\nboom"):
        async with backend.start(["kcp", "skr-a", "skr-b"]):
            raise AssertionError("must not start")
    verbs = [(c[1], c[2], c[c.index("--name") + 1]) for c in runner.commands[1:]]
    assert verbs == [
        ("create", "cluster", "wh-r1-kcp"),
        ("create", "cluster", "wh-r1-skr-a"),
        ("delete", "cluster", "wh-r1-skr-a"),
        ("delete", "cluster", "wh-r1-kcp"),
    ]
    assert backend.created == []
    ports = runner.configs["wh-r1-kcp"]["nodes"][0]["extraPortMappings"]  # type: ignore[index]
    assert ports[0]["containerPort"] == GATEWAY_NODE_PORT


async def test_clusters_get_the_image_and_are_handed_on_by_kubeconfig_only(
    tmp_path: Path,
) -> None:
    """kind writes no kubeconfig here, so the kubeconfig hand-over fails — after the image
    was loaded into every SKR (not the KCP) — and every cluster is deleted again."""
    runner = FakeRunner()
    backend = KindBackend(run_id="r2", runner=runner, image="watcher:dev")
    with pytest.raises(ClusterError, match="no kubeconfig context 'kind-wh-r2-kcp'"):
        async with backend.start(["kcp", "skr-a"]):
            raise AssertionError("must not start")
    assert [c[:3] for c in runner.commands] == [
        ["docker", "info", "--format"],
        ["kind", "create", "cluster"],
        ["kind", "create", "cluster"],
        ["kind", "load", "docker-image"],
        ["kind", "delete", "cluster"],
        ["kind", "delete", "cluster"],
    ]
    assert runner.commands[3] == [
        "kind",
        "load",
        "docker-image",
        "watcher:dev",
        "--name",
        "wh-r2-skr-a",
    ]
    assert backend.created == []
