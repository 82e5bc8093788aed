"""The pure decisions of the kubelet emulation: a Deployment's pod as a launch plan
(``kubelet.pods``), the Deployment's status, the EndpointSlices and kube-proxy's routes
(``kubelet.status``); plus the atomic volume writer and the launcher's port publishing."""

from __future__ import annotations

import base64
import copy
import datetime as dt
import ipaddress
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.clusters.apiserver import loopback_service_range
from harness.platform.kubelet.node import write_volume
from harness.platform.kubelet.pods import (
    LaunchPlan,
    PodIdentity,
    Probe,
    Unrunnable,
    Volume,
    VolumeFile,
    launch_plan,
    launcher_argv,
    pod_identity,
    pod_ip,
    template_hash,
)
from harness.platform.kubelet.status import (
    MANAGED_BY,
    PodView,
    deployment_status,
    endpoint_slice,
    service_routes,
    status_differs,
)
from harness.skr import isolate

Obj = dict[str, Any]
NOW = dt.datetime(2025, 5, 1, 12, 0, 0, tzinfo=dt.UTC)
IMAGE = "europe-docker.pkg.dev/kyma-project/prod/runtime-watcher:1.4.3"
POD_DIR = Path("/pods/kyma-system/skr-webhook-abc-xyz12")
SSL = POD_DIR / "volumes" / "ssl"
HOST_ENV = {"PATH": "/usr/bin", "HOME": "/root", "LANG": "C.UTF-8", "SECRET_OF_HOST": "x"}
POD = PodIdentity("kyma-system", POD_DIR.name, "u-1", "10.244.0.2", {"app": "skr-webhook"})


def commands(image: str) -> Sequence[str] | None:
    return ["/venv/bin/watcher-webhook"] if "/runtime-watcher:" in image else None


def upstream_deployment(**container: Any) -> Obj:
    """Upstream's skr-webhook Deployment after KLM's edits."""
    env = {"WEBHOOK_PORT": "8443", "METRICS_PORT": "2112", "TLS_KEY": "/app/etc/ssl/tls.key",
           "TLS_CERT": "/app/etc/ssl/tls.crt", "CA_CERT": "/app/etc/ssl/ca.crt",
           "TLS_CALLBACK": "true", "KCP_CONTRACT": "v2", "KCP_ADDR": "localhost:30443"}  # fmt: skip
    pod_name = {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
    spec: Obj = {
        "name": "server",
        "image": IMAGE,
        "env": [pod_name, *({"name": k, "value": v} for k, v in env.items())],
        "ports": [
            {"containerPort": 8443, "name": "watcher-port"},
            {"containerPort": 2112, "name": "metrics-port"},
        ],
        "volumeMounts": [{"name": "ssl", "mountPath": "/app/etc/ssl"}],
        "resources": {"limits": {"memory": "200Mi"}},
        "securityContext": {"runAsNonRoot": True},
        **container,
    }
    items = [{"key": k, "path": k} for k in ("tls.key", "tls.crt", "ca.crt")]
    labels = {"app": "skr-webhook", "operator.kyma-project.io/pod-restart-trigger": "4711"}
    template = {
        "metadata": {"labels": labels},
        "spec": {
            "priorityClassName": "kyma-system-priority",
            "containers": [spec],
            "volumes": [
                {"name": "ssl", "secret": {"secretName": "skr-webhook-tls", "items": items}}
            ],
        },
    }
    meta = {"name": "skr-webhook", "namespace": "kyma-system", "generation": 1, "uid": "d-1"}
    return {"metadata": meta, "spec": {"replicas": 1, "template": template}}


def tls_secret(**data: bytes) -> Obj:
    values = {"tls.key": b"KEY", "tls.crt": b"CERT", "ca.crt": b"CA", **data}
    return {"data": {k: base64.b64encode(v).decode() for k, v in values.items()}}


def plan_for(deployment: Obj, secrets: dict[str, Obj] | None = None) -> LaunchPlan | Unrunnable:
    if secrets is None:
        secrets = {"kyma-system/skr-webhook-tls": tls_secret()}
    return launch_plan(deployment, pod=POD, pod_dir=POD_DIR, secrets=secrets,
                       command_for=commands, host_env=HOST_ENV)  # fmt: skip


def test_upstreams_deployment_runs_the_host_command_with_its_own_environment() -> None:
    plan = plan_for(upstream_deployment())
    assert isinstance(plan, LaunchPlan)
    assert plan.argv == ("/venv/bin/watcher-webhook",)
    assert plan.env == {
        "PATH": "/usr/bin", "HOME": "/root", "LANG": "C.UTF-8", "POD_NAME": POD.name,
        "WEBHOOK_PORT": "8443", "METRICS_PORT": "2112", "TLS_KEY": str(SSL / "tls.key"),
        "TLS_CERT": str(SSL / "tls.crt"), "CA_CERT": str(SSL / "ca.crt"),
        "TLS_CALLBACK": "true", "KCP_CONTRACT": "v2", "KCP_ADDR": "localhost:30443",
    }  # fmt: skip
    (volume,) = plan.volumes
    assert (volume.name, volume.directory) == ("ssl", SSL)
    assert [(f.path, f.data, f.mode) for f in volume.files] == [
        ("tls.key", b"KEY", 0o644),
        ("tls.crt", b"CERT", 0o644),
        ("ca.crt", b"CA", 0o644),
    ]
    assert plan.ports == (("watcher-port", 8443), ("metrics-port", 2112))
    assert plan.readiness == Probe(8443, period=0.2, implicit=True)
    assert (plan.grace_seconds, plan.egress) == (30.0, "localhost:30443")
    argv = launcher_argv(plan, {8443: 41001, 2112: 41002}, python="/venv/bin/python")
    assert argv == [
        "/venv/bin/python", "-m", "harness.skr.isolate",
        "--publish", "127.0.0.1:41001:8443", "--publish", "127.0.0.1:41002:2112",
        "--kcp", "localhost:30443", "--", "/venv/bin/watcher-webhook",
    ]  # fmt: skip


def test_field_refs_args_and_a_readiness_probe_on_a_named_port() -> None:
    env = [
        {"name": "NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
    ]
    probe = {"httpGet": {"path": "/readyz", "port": "metrics-port"}, "periodSeconds": 2}
    deployment = upstream_deployment(
        env=env, args=["--cert=/app/etc/ssl/tls.crt"], readinessProbe=probe
    )
    plan = plan_for(deployment)
    assert isinstance(plan, LaunchPlan)
    assert (plan.env["NS"], plan.env["IP"]) == ("kyma-system", "10.244.0.2")
    assert plan.argv[1:] == ("--cert=/app/etc/ssl/tls.crt",)  # only a whole path is mapped
    assert plan.readiness == Probe(2112, path="/readyz", period=2.0)
    tcp = plan_for(upstream_deployment(readinessProbe={"tcpSocket": {"port": 8443}}))
    assert isinstance(tcp, LaunchPlan) and tcp.readiness == Probe(8443)


def test_an_image_without_host_command_is_unrunnable_and_a_missing_secret_waits() -> None:
    unknown = plan_for(upstream_deployment(image="registry.example.com/other:1.0"))
    assert unknown == Unrunnable("no host command for image registry.example.com/other:1.0")
    missing = plan_for(upstream_deployment(), secrets={})
    assert isinstance(missing, Unrunnable) and missing.waiting
    assert 'secret "skr-webhook-tls" not found' in missing.message
    partial = plan_for(upstream_deployment(), {"kyma-system/skr-webhook-tls": {"data": {}}})
    assert isinstance(partial, Unrunnable) and partial.waiting
    assert "non-existent secret key: tls.key" in partial.message
    elsewhere = plan_for(upstream_deployment(), {"default/skr-webhook-tls": tls_secret()})
    assert isinstance(elsewhere, Unrunnable) and elsewhere.waiting


@pytest.mark.parametrize(
    "change",
    [
        {"command": ["/bin/sh"]},
        {"envFrom": [{"secretRef": {"name": "x"}}]},
        {"env": [{"name": "A", "valueFrom": {"secretKeyRef": {"name": "x", "key": "k"}}}]},
        {"readinessProbe": {"exec": {"command": ["true"]}}},
        {"volumeMounts": [{"name": "ssl", "mountPath": "/x", "subPath": "tls.crt"}]},
    ],
)
def test_what_the_emulation_cannot_honour_makes_the_pod_unrunnable(change: Obj) -> None:
    plan = plan_for(upstream_deployment(**change))
    assert isinstance(plan, Unrunnable) and not plan.waiting
    assert "not supported by the kubelet emulation" in plan.message


def test_other_volumes_and_containers_are_unrunnable() -> None:
    memory = upstream_deployment()
    memory["spec"]["template"]["spec"]["volumes"] = [
        {"name": "ssl", "emptyDir": {"medium": "Memory"}}
    ]
    config_map = upstream_deployment()
    config_map["spec"]["template"]["spec"]["volumes"] = [
        {"name": "ssl", "configMap": {"name": "x"}}
    ]
    two = upstream_deployment()
    two["spec"]["template"]["spec"]["containers"] *= 2
    for deployment in (memory, config_map, two):
        plan = plan_for(deployment)
        assert isinstance(plan, Unrunnable) and not plan.waiting


def test_an_empty_dir_is_a_directory_of_the_pod_mounted_where_asked() -> None:
    deployment = upstream_deployment()
    spec = deployment["spec"]["template"]["spec"]
    spec["volumes"].append({"name": "tmp", "emptyDir": {"sizeLimit": "16Mi"}})
    container = spec["containers"][0]
    container["volumeMounts"].append({"name": "tmp", "mountPath": "/tmp"})
    container["env"].append({"name": "TMPDIR", "value": "/tmp"})
    plan = plan_for(deployment)
    assert isinstance(plan, LaunchPlan)
    tmp = next(v for v in plan.volumes if v.name == "tmp")
    assert tmp.empty_dir and tmp.files == ()
    assert plan.env["TMPDIR"] == str(tmp.directory)


@given(st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=4))
def test_the_template_hash_follows_the_template_only(labels: dict[str, str]) -> None:
    deployment = upstream_deployment()
    other = copy.deepcopy(deployment)
    other["spec"]["replicas"] = 3
    other["metadata"]["generation"] = 7
    assert template_hash(other) == template_hash(deployment)
    other["spec"]["template"]["metadata"]["labels"] = labels
    assert (template_hash(other) == template_hash(deployment)) == (
        labels == deployment["spec"]["template"]["metadata"]["labels"]
    )


@given(st.integers(0, 65530))
def test_pod_addresses_are_usable_addresses_of_the_cidr(index: int) -> None:
    address = ipaddress.ip_address(pod_ip(index))
    network = ipaddress.ip_network("10.244.0.0/16")
    assert address in network and address not in (network[0], network[1])
    assert address != network.broadcast_address and pod_ip(index) != pod_ip(index + 1)


def test_a_pod_is_named_after_its_template_and_carries_its_labels() -> None:
    deployment = upstream_deployment()
    pod = pod_identity(deployment, "u-2", "10.244.0.3", "b2c4d")
    pod_hash = template_hash(deployment)
    assert pod.name == f"skr-webhook-{pod_hash}-b2c4d" and pod.namespace == "kyma-system"
    assert pod.labels["pod-template-hash"] == pod_hash and pod.labels["app"] == "skr-webhook"


def view(name: str = "a", *, ready: bool, terminating: bool = False, hash_: str = "") -> PodView:
    ip = f"10.244.0.{ord(name[0]) % 200 + 2}"
    identity = PodIdentity("kyma-system", name, f"u-{name}", ip, {"app": "skr-webhook"})
    ports = (("watcher-port", 8443), ("metrics-port", 2112))
    pod_hash = hash_ or template_hash(upstream_deployment())
    return PodView(identity, ports, pod_hash, ready, terminating)


def conditions(status: Obj) -> dict[str, Obj]:
    return {c["type"]: c for c in status["conditions"]}


def test_a_new_deployment_progresses_then_becomes_available() -> None:
    deployment = upstream_deployment()
    starting = deployment_status(deployment, [view(ready=False)], now=NOW)
    counts = [starting[k] for k in ("replicas", "readyReplicas", "unavailableReplicas")]
    assert counts == [1, 0, 1]
    assert conditions(starting)["Available"]["status"] == "False"
    assert conditions(starting)["Progressing"]["reason"] == "ReplicaSetUpdated"
    deployment["status"] = starting
    later = NOW + dt.timedelta(seconds=5)
    ready = deployment_status(deployment, [view(ready=True)], now=later)
    assert ready["availableReplicas"] == ready["updatedReplicas"] == 1
    progressing = conditions(ready)["Progressing"]
    assert progressing["reason"] == "NewReplicaSetAvailable"
    assert progressing["lastTransitionTime"] == "2025-05-01T12:00:00Z"  # status stayed True
    assert conditions(ready)["Available"]["lastTransitionTime"] == "2025-05-01T12:00:05Z"
    assert not status_differs(ready, deployment_status({**deployment, "status": ready},
                                                       [view(ready=True)], now=later))  # fmt: skip


def test_a_rollout_counts_old_and_new_pods_and_failures_are_replica_failures() -> None:
    deployment = upstream_deployment()
    pods = [view("old", ready=True, hash_="old"), view("new", ready=False)]
    rolling = deployment_status(deployment, pods, now=NOW)
    assert (rolling["replicas"], rolling["updatedReplicas"], rolling["readyReplicas"]) == (2, 1, 1)
    assert conditions(rolling)["Progressing"]["reason"] == "ReplicaSetUpdated"
    failed = deployment_status(deployment, [view(ready=False)], now=NOW, failure="no image")
    assert conditions(failed)["ReplicaFailure"]["message"] == "no image"
    deployment["spec"]["replicas"] = 0
    scaled = deployment_status(deployment, [], now=NOW)
    assert conditions(scaled)["Available"]["status"] == "True" and scaled["replicas"] == 0
    assert not status_differs({"replicas": 0, "conditions": []}, {"conditions": []})


def service(name: str = "skr-webhook", target: Any = "watcher-port", ip: str = "127.9.0.5") -> Obj:
    meta = {"name": name, "namespace": "kyma-system", "uid": "s-1"}
    port = {"name": "webhook", "port": 443, "targetPort": target}
    spec = {"selector": {"app": "skr-webhook"}, "ports": [port], "clusterIP": ip}
    return {"metadata": meta, "spec": spec}


def test_the_slice_lists_the_pod_ip_and_container_port_under_the_service_ports_name() -> None:
    pod = view(ready=True)
    slice_ = endpoint_slice(service(), [pod, view("z", ready=True, terminating=True)])
    assert slice_ is not None and slice_["ports"] == [
        {"name": "webhook", "port": 8443, "protocol": "TCP"}
    ]
    assert slice_["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"] == MANAGED_BY
    (ready, draining) = slice_["endpoints"]
    assert ready["addresses"] == [pod.pod.ip] and ready["targetRef"]["name"] == "a"
    assert draining["conditions"] == {"ready": False, "serving": True, "terminating": True}
    assert endpoint_slice(service(target=9443), [pod])["ports"][0]["port"] == 9443  # type: ignore[index]
    other = {**service(), "spec": {**service()["spec"], "selector": {"app": "other"}}}
    assert endpoint_slice(other, [pod]) is None


def test_kube_proxy_routes_ready_endpoints_else_serving_terminating_ones() -> None:
    old, new = view("old", ready=True, terminating=True), view("new", ready=True)
    slice_ = endpoint_slice(service(), [old, new])
    assert slice_ is not None
    (route,) = service_routes(service(), [slice_])
    assert (route.key, route.endpoints) == (("127.9.0.5", 443), ((new.pod.ip, 8443),))
    draining = endpoint_slice(service(), [old])
    assert service_routes(service(), [draining])[0].endpoints == ((old.pod.ip, 8443),)  # type: ignore[list-item]
    assert service_routes(service(ip="None"), [slice_]) == []
    assert service_routes(service(name="other"), [slice_])[0].endpoints == ()


@given(st.lists(st.tuples(st.booleans(), st.booleans()), min_size=1, max_size=5))
def test_routes_through_the_slice_reach_exactly_the_ready_pods(
    states: list[tuple[bool, bool]],
) -> None:
    pods = [view(chr(97 + i), ready=r, terminating=t) for i, (r, t) in enumerate(states)]
    slice_ = endpoint_slice(service(), pods)
    assert slice_ is not None
    (route,) = service_routes(service(), [slice_])
    ready = {(p.pod.ip, 8443) for p in pods if p.ready and not p.terminating}
    draining = {(p.pod.ip, 8443) for p in pods if p.ready and p.terminating}
    assert set(route.endpoints) == (ready or draining)


def test_a_secret_volume_is_swapped_at_once_and_unchanged_content_is_not_rewritten(
    tmp_path: Path,
) -> None:
    files = (VolumeFile("tls.crt", b"one", 0o644), VolumeFile("ca.crt", b"ca", 0o440))
    assert write_volume(Volume("ssl", tmp_path / "ssl", files))
    assert (tmp_path / "ssl" / "tls.crt").read_bytes() == b"one"
    assert (tmp_path / "ssl" / "tls.crt").is_symlink()
    assert ((tmp_path / "ssl" / "ca.crt").stat().st_mode & 0o777) == 0o440
    first = (tmp_path / "ssl" / "..data").resolve()
    assert not write_volume(Volume("ssl", tmp_path / "ssl", files))
    assert write_volume(Volume("ssl", tmp_path / "ssl", (VolumeFile("tls.crt", b"two", 0o644),)))
    assert (tmp_path / "ssl" / "tls.crt").read_bytes() == b"two"
    assert not (tmp_path / "ssl" / "ca.crt").exists() and not first.exists()


def test_a_loopback_service_range_of_the_apiserver_stays_off_127_0() -> None:
    for _ in range(50):
        network = ipaddress.IPv4Network(loopback_service_range())
        assert network.prefixlen == 24 and network.is_loopback
        assert not network.subnet_of(ipaddress.IPv4Network("127.0.0.0/16"))


def test_isolate_publishes_ports_and_keeps_a_loopback_kcp_name() -> None:
    args = isolate._parser().parse_args(
        ["--publish", "127.0.0.1:41001:8443", "--metrics", "127.0.0.1:2112", "--", "x"]
    )
    assert args.publish == [("127.0.0.1", 41001, 8443)] and args.admission is None
    assert isolate.kcp_inside("localhost", 30443).kcp_addr == "localhost:30443"
    assert isolate.kcp_inside("127.0.0.1", 5) == isolate.KcpInside(("127.0.0.1",), 5, "127.0.0.1:5")
    elsewhere = isolate.kcp_inside("192.0.2.7", 443)  # not loopback: reached as 127.0.0.1
    assert (elsewhere.hosts, elsewhere.kcp_addr) == (("127.0.0.1",), "127.0.0.1:443")
    with pytest.raises(SystemExit):
        isolate._parser().parse_args(["--publish", "127.0.0.1:1", "--", "x"])
