"""A Deployment's pod as a host process, decided without I/O: :func:`launch_plan` gives
the caller's host command for the image (there is no image), the env with paths under a
``volumeMount`` rewritten to the pod's directory (a host process has no mount namespace),
the secret volumes' files, the ports and readiness probe — or :class:`Unrunnable`."""

from __future__ import annotations

import base64
import binascii
import ipaddress
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Obj = dict[str, Any]
CommandFor = Callable[[str], Sequence[str] | None]
"""The host argv standing for an image's entrypoint; None: the image cannot run here."""

HOST_ENV_KEYS = ("PATH", "HOME", "LANG")
FIELD_PATHS = ("metadata.name", "metadata.namespace", "status.podIP")
_SAFE = "bcdfghjklmnpqrstvwxz2456789"  # the alphabet of Kubernetes' name hashes


def short_hash(obj: Any) -> str:
    """FNV-32a of ``obj``'s canonical JSON, encoded as Kubernetes encodes name hashes."""
    value = 0x811C9DC5
    for byte in json.dumps(obj, sort_keys=True, separators=(",", ":")).encode():
        value = ((value ^ byte) * 0x01000193) & 0xFFFFFFFF
    return "".join(_SAFE[b % len(_SAFE)] for b in str(value).encode())


def template_hash(deployment: Mapping[str, Any]) -> str:
    """``pod-template-hash``: changes exactly when ``spec.template`` does."""
    return short_hash((deployment.get("spec") or {}).get("template") or {})


def pod_ip(index: int) -> str:
    """The ``index``-th pod address of 10.244.0.0/16 (after network and gateway)."""
    return str(ipaddress.ip_address("10.244.0.2") + index % 65533)


@dataclass(frozen=True)
class PodIdentity:
    namespace: str
    name: str
    uid: str
    ip: str
    labels: Mapping[str, str]


def pod_identity(deployment: Mapping[str, Any], uid: str, ip: str, suffix: str) -> PodIdentity:
    """A new pod of the Deployment's template: ``<name>-<template hash>-<suffix>``, the
    template's labels plus ``pod-template-hash``."""
    meta, pod_hash = deployment["metadata"], template_hash(deployment)
    template = ((deployment.get("spec") or {}).get("template") or {}).get("metadata") or {}
    labels = {**(template.get("labels") or {}), "pod-template-hash": pod_hash}
    return PodIdentity(meta["namespace"], f"{meta['name']}-{pod_hash}-{suffix}", uid, ip, labels)


@dataclass(frozen=True)
class VolumeFile:
    path: str  # a file name in the volume's directory
    data: bytes
    mode: int


@dataclass(frozen=True)
class Volume:
    name: str
    directory: Path
    files: tuple[VolumeFile, ...]
    empty_dir: bool = False  # an emptyDir: a fresh directory per pod, nothing written into it


@dataclass(frozen=True)
class Probe:
    """Readiness: TCP connect, or plain HTTP GET when ``path`` is set, to a container port."""

    port: int
    path: str | None = None
    period: float = 10.0
    timeout: float = 1.0
    failure_threshold: int = 3
    implicit: bool = False  # not in the spec: "the first container port accepts"


@dataclass(frozen=True)
class LaunchPlan:
    argv: tuple[str, ...]
    env: Mapping[str, str]
    volumes: tuple[Volume, ...]
    ports: tuple[tuple[str, int], ...]  # (name, containerPort), TCP
    readiness: Probe | None  # None: ready once started (no port to check)
    grace_seconds: float
    egress: str | None  # KCP_ADDR: the one address outside the pod it reaches


@dataclass(frozen=True)
class Unrunnable:
    """Cannot run with this template (no host command, an unsupported field), or not yet
    (``waiting``: a Secret is missing, ContainerCreating)."""

    message: str
    waiting: bool = False


def _unsupported(what: str) -> Unrunnable:
    return Unrunnable(f"{what} (not supported by the kubelet emulation)")


def _map_path(value: str, mounts: Mapping[str, Path]) -> str:
    """``value`` with a mount path it starts with replaced by the host directory."""
    for mount_path, host in sorted(mounts.items(), key=lambda m: -len(m[0])):
        base = mount_path.rstrip("/")
        if base and (value == base or value.startswith(f"{base}/")):
            return str(host / value[len(base) + 1 :])
    return value


def _volume(
    volume: Mapping[str, Any], directory: Path, secrets: Mapping[str, Mapping[str, Any]], ns: str
) -> Volume | Unrunnable:
    name, source = str(volume.get("name", "")), volume.get("secret")
    if "emptyDir" in volume and not (volume.get("emptyDir") or {}).get("medium"):
        return Volume(name, directory, (), empty_dir=True)
    if source is None:
        return _unsupported(f"volume {name}: {next((k for k in volume if k != 'name'), '')}")
    secret_name = str(source.get("secretName") or "")
    prefix = f'MountVolume.SetUp failed for volume "{name}" : '
    if f"{ns}/{secret_name}" not in secrets:
        return Unrunnable(f'{prefix}secret "{secret_name}" not found', waiting=True)
    try:
        data = {
            str(k): base64.b64decode(str(v), validate=True)
            for k, v in (secrets[f"{ns}/{secret_name}"].get("data") or {}).items()
        }
    except (binascii.Error, ValueError):
        return Unrunnable(f'{prefix}secret "{secret_name}" is not base64')
    files = []
    for item in source.get("items") or [{"key": k} for k in sorted(data)]:
        key, path = str(item.get("key", "")), str(item.get("path") or item.get("key", ""))
        if key not in data:
            return Unrunnable(f"{prefix}references non-existent secret key: {key}", waiting=True)
        if "/" in path or path.startswith(".."):
            return _unsupported(f"volume {name}: item path {path!r}")
        mode = int(item.get("mode", source.get("defaultMode", 0o644)))
        files.append(VolumeFile(path, data[key], mode))
    return Volume(name, directory, tuple(files))


def _readiness(spec: Mapping[str, Any], ports: Sequence[tuple[str, int]]) -> Probe | Unrunnable:
    kind = next((k for k in ("tcpSocket", "httpGet", "exec", "grpc") if k in spec), "unknown")
    action = spec.get(kind) or {}
    port = str(dict(ports).get(str(action.get("port")), action.get("port")))
    plain = action.get("scheme", "HTTP") == "HTTP"
    if kind not in ("tcpSocket", "httpGet") or not plain or not port.isdigit():
        return _unsupported(f"readinessProbe {kind} at port {port}")
    return Probe(
        int(port),
        path=str(action.get("path") or "/") if kind == "httpGet" else None,
        period=float(spec.get("periodSeconds") or 10),
        timeout=float(spec.get("timeoutSeconds") or 1),
        failure_threshold=int(spec.get("failureThreshold") or 3),
    )


def launch_plan(
    deployment: Mapping[str, Any],
    *,
    pod: PodIdentity,
    pod_dir: Path,
    secrets: Mapping[str, Mapping[str, Any]],
    command_for: CommandFor,
    host_env: Mapping[str, str],
) -> LaunchPlan | Unrunnable:
    """Pod ``pod`` of ``deployment`` as a host process with its files under ``pod_dir``;
    ``secrets``: by ``namespace/name``; ``host_env``: where ``PATH``, ``HOME``
    and ``LANG`` come from (nothing else of the host's environment is passed)."""
    template = (deployment.get("spec") or {}).get("template") or {}
    spec: Mapping[str, Any] = template.get("spec") or {}
    containers = spec.get("containers") or []
    if len(containers) != 1 or spec.get("initContainers"):
        return _unsupported("a pod of other than exactly one container")
    container: Mapping[str, Any] = containers[0]
    image = str(container.get("image") or "")
    host_command = command_for(image)
    if host_command is None:
        return Unrunnable(f"no host command for image {image}")
    if unsupported := [k for k in ("command", "envFrom") if container.get(k)]:
        return _unsupported(f"container {unsupported[0]}")

    volumes: dict[str, Volume] = {}
    for volume in spec.get("volumes") or []:
        name = str(volume.get("name", ""))
        result = _volume(volume, pod_dir / "volumes" / name, secrets, pod.namespace)
        if not isinstance(result, Volume):
            return result
        volumes[name] = result
    mounts: dict[str, Path] = {}
    for mount in container.get("volumeMounts") or []:
        if mount.get("name") not in volumes or mount.get("subPath"):
            return _unsupported(f"volumeMount {mount.get('name')!r}")
        mounts[str(mount.get("mountPath", ""))] = volumes[mount["name"]].directory

    env = _env(container, pod, host_env, mounts)
    if isinstance(env, Unrunnable):
        return env
    args = tuple(_map_path(str(a), mounts) for a in container.get("args") or [])

    ports = tuple(
        (str(p.get("name") or ""), int(p["containerPort"]))
        for p in container.get("ports") or []
        if str(p.get("protocol") or "TCP") == "TCP"
    )
    probe = container.get("readinessProbe")
    implicit = Probe(ports[0][1], period=0.2, implicit=True) if ports else None
    readiness = _readiness(probe, ports) if probe else implicit
    if isinstance(readiness, Unrunnable):
        return readiness
    grace = spec.get("terminationGracePeriodSeconds")
    grace_seconds = 30.0 if grace is None else float(grace)
    argv, egress = (*host_command, *args), env.get("KCP_ADDR") or None
    return LaunchPlan(argv, env, tuple(volumes.values()), ports, readiness, grace_seconds, egress)


def _env(
    container: Mapping[str, Any],
    pod: PodIdentity,
    host_env: Mapping[str, str],
    mounts: Mapping[str, Path],
) -> dict[str, str] | Unrunnable:
    """The host's ``HOST_ENV_KEYS``, then the container's env: ``fieldRef``s resolved,
    values under a ``volumeMount`` rewritten to the pod's directory."""
    fields = dict(zip(FIELD_PATHS, (pod.name, pod.namespace, pod.ip), strict=True))
    env = {k: host_env[k] for k in HOST_ENV_KEYS if k in host_env}
    for var in container.get("env") or []:
        name, value = str(var.get("name", "")), str(var.get("value") or "")
        if "valueFrom" in var:
            path = ((var["valueFrom"] or {}).get("fieldRef") or {}).get("fieldPath")
            if path not in fields:
                return _unsupported(f"env {name}: valueFrom other than fieldRef {FIELD_PATHS}")
            value = fields[path]
        env[name] = _map_path(value, mounts)
    return env


def launcher_argv(plan: LaunchPlan, host_ports: Mapping[int, int], *, python: str) -> list[str]:
    """The plan's argv inside ``python -m harness.skr.isolate``: a network namespace of its
    own, each container port published on a host port of 127.0.0.1, ``KCP_ADDR`` out."""
    argv = [python, "-m", "harness.skr.isolate"]
    for _, port in plan.ports:
        argv += ["--publish", f"127.0.0.1:{host_ports[port]}:{port}"]
    if plan.egress:
        argv += ["--kcp", plan.egress]
    return [*argv, "--", *plan.argv]
