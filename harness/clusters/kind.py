"""The ``kind`` backend: a kind cluster (Kubernetes in Docker) per KCP and SKR.

``start(names)`` checks for the ``kind`` CLI and a Docker engine first
(:class:`KindUnavailable` says what to install), creates one cluster per name (the KCP's
node maps the gateway's NodePort to a host port), loads the webhook image into every SKR
and hands the clusters on as the ``kubeconfig`` backend would: through the kubeconfig
files kind wrote. Leaving deletes every cluster it created, half-made ones too.

Every command goes through a :class:`CommandRunner`; tests fake it and check the exact
command lines (:class:`KindCommands`), since these machines have no Docker engine.

API servers in kind nodes reach this host at the kind network's gateway address
(:meth:`KindBackend.host_address`), the default host address; with
``WATCHER_HARNESS_WEBHOOK_MODE=in-cluster`` the webhook runs from the image behind a
*service* clientConfig instead (``harness.skr.in_cluster``).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import os
import re
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import yaml

from harness.clusters.kubeconfig_backend import KubeconfigBackend, new_run_id
from harness.clusters.plane import Environment, validate_cluster_names
from harness.clusters.selection import ClusterTarget
from harness.errors import ClusterError

KIND_API_VERSION = "kind.x-k8s.io/v1alpha4"
GATEWAY_NODE_PORT = 30443
"""The KCP gateway's NodePort inside the KCP's kind node (the SKRs' ``KCP_ADDR`` port)."""
DEFAULT_GATEWAY_HOST_PORT = 32443
ENV_IMAGE = "WATCHER_HARNESS_IMAGE"
ENV_NODE_IMAGE = "WATCHER_HARNESS_KIND_NODE_IMAGE"
INSTALL_KIND = (
    "the kind backend needs the `kind` CLI on PATH: install it "
    "(https://kind.sigs.k8s.io/docs/user/quick-start/#installation, e.g. "
    "`go install sigs.k8s.io/kind@latest`) or use --backend local"
)
INSTALL_DOCKER = (
    "the kind backend needs a running Docker engine (`docker info` failed{detail}): install "
    "and start Docker (https://docs.docker.com/engine/install/) or use --backend local"
)
EXIT_UNAVAILABLE = 3
"""Exit status of a command line when the chosen backend's tools are missing."""


class KindUnavailable(ClusterError):
    """``kind`` or a Docker engine is missing; the message is one line saying what to do."""


class KindCommandFailed(ClusterError):
    """A kind or docker command exited non-zero; the message holds its output's tail."""


@dataclass(frozen=True)
class PortMapping:
    """``extraPortMappings`` entry: a node port reachable on the host."""

    container_port: int
    host_port: int
    listen_address: str = "127.0.0.1"
    protocol: str = "TCP"

    def to_dict(self) -> dict[str, Any]:
        return {
            "containerPort": self.container_port,
            "hostPort": self.host_port,
            "listenAddress": self.listen_address,
            "protocol": self.protocol,
        }


def kind_config(
    *,
    port_mappings: Sequence[PortMapping] = (),
    node_image: str | None = None,
    api_server_address: str = "127.0.0.1",
) -> dict[str, Any]:
    """A one-node kind ``Config`` (pure): the control plane, its port mappings, its image."""
    node: dict[str, Any] = {"role": "control-plane"}
    if node_image:
        node["image"] = node_image
    if port_mappings:
        node["extraPortMappings"] = [m.to_dict() for m in port_mappings]
    return {
        "kind": "Cluster",
        "apiVersion": KIND_API_VERSION,
        "networking": {"apiServerAddress": api_server_address},
        "nodes": [node],
    }


def cluster_config(
    name: str, *, gateway_host_port: int = DEFAULT_GATEWAY_HOST_PORT, node_image: str | None = None
) -> dict[str, Any]:
    """The KCP maps the gateway NodePort to ``gateway_host_port``; SKRs need no mapping."""
    mappings = (PortMapping(GATEWAY_NODE_PORT, gateway_host_port),) if name == "kcp" else ()
    return kind_config(port_mappings=mappings, node_image=node_image)


def kind_cluster_name(run_id: str, name: str) -> str:
    """``wh-<run>-<name>``: a DNS label short enough for kind's container names."""
    run = re.sub(r"[^a-z0-9-]+", "-", run_id.lower()).strip("-")[-16:].strip("-")
    return f"wh-{run}-{name}"[:50].rstrip("-")


@dataclass(frozen=True)
class KindCommands:
    """The exact command lines the backend runs (pure)."""

    kind: str = "kind"
    docker: str = "docker"
    wait: str = "120s"

    def docker_info(self) -> list[str]:
        return [self.docker, "info", "--format", "{{.ServerVersion}}"]

    def create(self, cluster: str, config: Path, kubeconfig: Path) -> list[str]:
        return [
            self.kind, "create", "cluster", "--name", cluster, "--config", str(config),
            "--kubeconfig", str(kubeconfig), "--wait", self.wait,
        ]  # fmt: skip

    def load_image(self, image: str, cluster: str) -> list[str]:
        return [self.kind, "load", "docker-image", image, "--name", cluster]

    def network_gateways(self, network: str = "kind") -> list[str]:
        return [
            self.docker, "network", "inspect", network,
            "--format", "{{range .IPAM.Config}}{{.Gateway}} {{end}}",
        ]  # fmt: skip

    def delete(self, cluster: str, kubeconfig: Path) -> list[str]:
        return [self.kind, "delete", "cluster", "--name", cluster, "--kubeconfig", str(kubeconfig)]


@dataclass(frozen=True)
class CommandResult:
    argv: tuple[str, ...]
    returncode: int
    output: str  # stdout and stderr, interleaved


class CommandRunner(Protocol):
    """Runs a command to completion (the backend's only way to the outside)."""

    def which(self, program: str) -> str | None: ...

    async def run(self, argv: Sequence[str]) -> CommandResult: ...


class SubprocessRunner:
    """Real commands: waited for, killed if the caller is cancelled, never left running."""

    def which(self, program: str) -> str | None:
        return shutil.which(program)

    async def run(self, argv: Sequence[str]) -> CommandResult:
        process = await asyncio.create_subprocess_exec(
            *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
        )
        try:
            out, _ = await process.communicate()
        except BaseException:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
            raise
        return CommandResult(tuple(argv), process.returncode or 0, out.decode("utf-8", "replace"))


def _tail(text: str, lines: int = 20) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


async def preflight(runner: CommandRunner, commands: KindCommands = KindCommands()) -> None:
    """:class:`KindUnavailable` unless ``kind`` is installed and a Docker engine answers."""
    if runner.which(commands.kind) is None:
        raise KindUnavailable(INSTALL_KIND)
    if runner.which(commands.docker) is None:
        raise KindUnavailable(INSTALL_DOCKER.format(detail=": no `docker` on PATH"))
    result = await runner.run(commands.docker_info())
    if result.returncode != 0:
        last = _tail(result.output, 1)
        raise KindUnavailable(INSTALL_DOCKER.format(detail=f": {last}" if last else ""))


def gateway_ipv4(output: str) -> str | None:
    """The first IPv4 gateway in ``docker network inspect``'s output (None: none)."""
    for word in output.split():
        try:
            address = ipaddress.ip_address(word)
        except ValueError:
            continue
        if address.version == 4:
            return str(address)
    return None


@dataclass
class KindBackend:
    """Kind clusters for the duration of an ``async with`` (see the module doc)."""

    run_id: str | None = None
    log_dir: Path | None = None
    namespaces: Mapping[str, Sequence[str]] | None = None
    runner: CommandRunner = field(default_factory=SubprocessRunner)
    commands: KindCommands = field(default_factory=KindCommands)
    image: str | None = field(default_factory=lambda: os.environ.get(ENV_IMAGE) or None)
    node_image: str | None = field(default_factory=lambda: os.environ.get(ENV_NODE_IMAGE) or None)
    gateway_host_port: int = DEFAULT_GATEWAY_HOST_PORT
    name: str = "kind"
    created: list[str] = field(default_factory=list)
    """kind cluster names created and not yet deleted."""

    async def _check(self, argv: Sequence[str]) -> CommandResult:
        result = await self.runner.run(argv)
        if result.returncode != 0:
            raise KindCommandFailed(
                f"`{' '.join(argv)}` exited {result.returncode}:\n{_tail(result.output)}"
            )
        return result

    async def host_address(self) -> str:
        """How pods and API servers in kind nodes reach this host: the ``kind`` network's
        IPv4 gateway. One-line :class:`KindUnavailable` naming the fix when unknown."""
        argv = self.commands.network_gateways()
        result = await self.runner.run(argv)
        address = gateway_ipv4(result.output) if result.returncode == 0 else None
        if address is None:
            last = _tail(result.output, 1)
            detail = last if result.returncode else f"no IPv4 gateway in {last!r}"
            raise KindUnavailable(
                f"cannot tell the kind network's gateway address (`{' '.join(argv)}`: "
                f"{detail}); set WATCHER_HARNESS_HOST_ADDRESS to an address of this host "
                "that kind nodes reach"
            )
        return address

    async def _delete(self, cluster: str, kubeconfig: Path) -> None:
        await self._check(self.commands.delete(cluster, kubeconfig))
        self.created.remove(cluster)

    @asynccontextmanager
    async def start(self, names: Sequence[str]) -> AsyncIterator[Environment]:
        names = validate_cluster_names(names)
        await preflight(self.runner, self.commands)
        run_id = self.run_id or new_run_id()
        started = time.monotonic()
        async with AsyncExitStack() as stack:
            workdir = Path(tempfile.mkdtemp(prefix="watcher-kind-"))
            stack.callback(shutil.rmtree, workdir, ignore_errors=True)
            targets: dict[str, ClusterTarget] = {}
            for name in names:
                cluster = kind_cluster_name(run_id, name)
                config = workdir / f"{name}-kind.yaml"
                kubeconfig = workdir / f"{name}.kubeconfig"
                text = yaml.safe_dump(
                    cluster_config(
                        name, gateway_host_port=self.gateway_host_port, node_image=self.node_image
                    ),
                    sort_keys=False,
                )
                config.write_text(text, encoding="utf-8")
                self.created.append(cluster)  # delete also a half-created cluster
                stack.push_async_callback(self._delete, cluster, kubeconfig)
                await self._check(self.commands.create(cluster, config, kubeconfig))
                if self.image and name != "kcp":
                    await self._check(self.commands.load_image(self.image, cluster))
                targets[name] = ClusterTarget((kubeconfig,), f"kind-{cluster}")
            inner = KubeconfigBackend(targets, run_id=run_id, namespaces=self.namespaces)
            env = await stack.enter_async_context(inner.start(names))
            yield Environment(
                backend=self.name,
                clusters=env.clusters,
                processes=(),
                startup_seconds=time.monotonic() - started,
                temp_dirs=(workdir, *env.temp_dirs),
            )
