"""Every rendered manifest applied with server-side dry-run (``dryRun=All``) to real API
servers of the local backend: the SKR set to an SKR cluster, the KCP set to a KCP cluster
that has the CRDs installed. The API server runs admission, defaulting and schema / CRD
validation on each object and stores nothing; deliberately broken objects must be
refused, so the test can fail. The gateway's Envoy configuration goes through Envoy's
own validation."""

from __future__ import annotations

import base64
import copy
import json
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio.client import ApiClient

from harness.clusters.binaries import Binaries
from harness.clusters.plane import Environment, LocalBackend
from harness.kcp.gateway.envoy_process import default_envoy
from harness.kcp.gateway.errors import GatewayError
from harness.kube import KubeError, get
from harness.manifests import build_inputs
from harness.manifests.apply import apply_manifests, apply_object, resource_for
from watcher.render.kcp_manifests import render_kcp_manifests
from watcher.render.skr_manifests import render_skr_manifests
from watcher.render.watcher_cr import klm_watcher_dict, watcher_dict

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

STATUS_WATCHER = watcher_dict(
    "cm-status",
    manager="cm-manager",
    resource=("", "v1", "configmaps"),
    field="status",
    labels_to_watch={"example.com/watched": "yes"},
    service=("cm-listener", "kcp-system", 9080),
)


@pytest.fixture(autouse=True)
def _fail_on_leaked_tasks(no_leaked_tasks: None) -> None:
    """Every test here must leave no asyncio task behind."""


@pytest.fixture
async def clusters(cluster_binaries: Binaries, tmp_path: Path) -> AsyncIterator[Environment]:
    async with LocalBackend(cluster_binaries, log_dir=tmp_path / "logs").start(
        ["kcp", "skr-a"]
    ) as env:
        yield env


def _inputs(tmp_path: Path, network_policies: str) -> Any:
    watchers = tmp_path / "watchers.yaml"
    watchers.write_text(yaml.safe_dump_all([klm_watcher_dict(), STATUS_WATCHER]))
    return build_inputs(
        image="kyma-watcher:0.1.0",
        kcp_addr="kcp.example.com:443",
        watchers_file=watchers,
        network_policies=network_policies,  # type: ignore[arg-type]
        node_port=30443,
    )


def _same(answer: dict[str, Any], obj: dict[str, Any]) -> bool:
    a, o = answer.get("metadata") or {}, obj["metadata"]
    return bool(
        answer.get("kind") == obj["kind"]
        and a.get("name") == o["name"]
        and a.get("namespace") == o.get("namespace")
    )


async def _refused(api: ApiClient, obj: dict[str, Any]) -> KubeError:
    with pytest.raises(KubeError) as caught:
        await apply_object(api, obj, dry_run=True)
    return caught.value


async def test_skr_manifests_pass_server_side_dry_run(
    clusters: Environment, tmp_path: Path
) -> None:
    objs = render_skr_manifests(_inputs(tmp_path, "upstream").skr)
    portable = render_skr_manifests(_inputs(tmp_path, "portable").skr)
    async with clusters["skr-a"].api_client() as api:
        await apply_object(api, objs[0])  # the Namespace, for real: the rest lives in it
        answers = await apply_manifests(api, objs, dry_run=True)
        assert len(answers) == len(objs) == 12
        for answer, obj in zip(answers, objs, strict=True):
            assert _same(answer, obj), (answer.get("kind"), obj["kind"])
        # The server processed them: defaults filled in, webhooks resolved to the Service.
        deployment = next(a for a in answers if a["kind"] == "Deployment")
        assert deployment["spec"]["strategy"]["type"] == "RollingUpdate"
        config = answers[-1]
        assert config["webhooks"][1]["rules"][0]["resources"] == ["configmaps/status"]
        assert config["webhooks"][0]["clientConfig"]["service"]["name"] == "skr-webhook"
        policies = [o for o in portable if o["kind"] == "NetworkPolicy"]
        assert len(await apply_manifests(api, policies, dry_run=True)) == 4
        # Nothing was stored.
        for obj in objs[1:]:
            resource = resource_for(obj)
            meta = obj["metadata"]
            assert await get(api, resource, meta["name"], meta.get("namespace")) is None

        # The test can fail: broken objects are refused by the server.
        bad_deployment = copy.deepcopy(next(o for o in objs if o["kind"] == "Deployment"))
        bad_deployment["spec"]["selector"] = {"matchLabels": {"app": "something-else"}}
        assert (await _refused(api, bad_deployment)).status == 422
        bad_config = copy.deepcopy(objs[-1])
        bad_config["webhooks"][0]["sideEffects"] = "Sometimes"
        assert (await _refused(api, bad_config)).status == 422
        bad_policy = copy.deepcopy(next(o for o in objs if o["kind"] == "NetworkPolicy"))
        bad_policy["spec"]["policyTypes"] = ["Sideways"]
        error = await _refused(api, bad_policy)
        assert error.status == 422
        assert "NetworkPolicy kyma-system/kyma-project.io--seed-to-watcher" in str(error)


async def test_kcp_manifests_pass_server_side_dry_run(
    clusters: Environment, tmp_path: Path
) -> None:
    objs = render_kcp_manifests(_inputs(tmp_path, "upstream").kcp)
    crds = [o for o in objs if o["kind"] == "CustomResourceDefinition"]
    async with clusters["kcp"].api_client() as api:
        # Namespace and CRDs for real (custom objects need their types), then everything.
        await apply_manifests(api, [objs[0], *crds])
        answers = await apply_manifests(api, objs, dry_run=True)
        assert [a["kind"] for a in answers] == [o["kind"] for o in objs]
        for answer, obj in zip(answers, objs, strict=True):
            assert _same(answer, obj)
        kinds = {a["kind"] for a in answers}
        assert {"Watcher", "Kyma", "Gateway", "VirtualService", "ConfigMap"} <= kinds
        service = next(a for a in answers if a["kind"] == "Service")
        assert service["spec"]["ports"][0]["nodePort"] == 30443
        watchers = [a for a in answers if a["kind"] == "Watcher"]
        assert [w["spec"]["field"] for w in watchers] == ["spec", "status"]
        for obj in objs:
            if obj["kind"] in ("Watcher", "VirtualService", "Deployment"):
                meta = obj["metadata"]
                assert await get(api, resource_for(obj), meta["name"], meta["namespace"]) is None

        bad_watcher = copy.deepcopy(next(o for o in objs if o["kind"] == "Watcher"))
        bad_watcher["spec"]["field"] = "metadata"  # the CRD allows spec | status
        error = await _refused(api, bad_watcher)
        assert error.status == 422
        assert "Watcher kcp-system/klm-watcher" in str(error)
        bad_service = copy.deepcopy(next(o for o in objs if o["kind"] == "Service"))
        bad_service["spec"]["ports"][0]["port"] = 70000  # ports end at 65535
        assert (await _refused(api, bad_service)).status == 422


def _envoy_static(data: dict[str, str], tls_dir: Path) -> dict[str, Any]:
    """The ConfigMap's bootstrap with LDS/CDS/RDS inlined as static resources, TLS paths
    pointing at ``tls_dir``: what Envoy would run once it has read the files."""
    text = {k: v.replace("/etc/envoy/tls", str(tls_dir)) for k, v in data.items()}
    listeners = json.loads(text["lds.yaml"])["resources"]
    clusters = json.loads(text["cds.yaml"])["resources"]
    routes = json.loads(text["rds.yaml"])["resources"][0]
    routes.pop("@type")
    for listener in listeners:
        listener.pop("@type")
        hcm = listener["filter_chains"][0]["filters"][0]["typed_config"]
        hcm.pop("rds")
        hcm["route_config"] = routes
    for cluster in clusters:
        cluster.pop("@type")
    admin = json.loads(text["envoy.json"])["admin"]
    return {"admin": admin, "static_resources": {"listeners": listeners, "clusters": clusters}}


def _envoy_validate(envoy: str, config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [envoy, "--mode", "validate", "-c", str(config), "--disable-hot-restart"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_gateway_config_passes_envoy_validation(tmp_path: Path) -> None:
    """The in-cluster gateway's Envoy configuration (STRICT_DNS clusters, the mTLS
    listener, the routes) is accepted by the Envoy the harness runs (``--mode validate``);
    a broken cluster type is refused."""
    try:
        envoy = str(default_envoy())
    except GatewayError as exc:
        pytest.skip(str(exc))
    objs = render_kcp_manifests(_inputs(tmp_path, "upstream").kcp)
    data = next(o for o in objs if o["kind"] == "ConfigMap")["data"]
    secret = next(o for o in objs if o["kind"] == "Secret")["data"]
    tls_dir = tmp_path / "tls"
    tls_dir.mkdir()
    for name, value in secret.items():
        (tls_dir / name).write_bytes(base64.b64decode(value))
    static = _envoy_static(data, tls_dir)
    assert {c["type"] for c in static["static_resources"]["clusters"]} == {"STRICT_DNS"}
    good = tmp_path / "static.json"
    good.write_text(json.dumps(static))
    result = _envoy_validate(envoy, good)
    assert result.returncode == 0, result.stdout + result.stderr
    static["static_resources"]["clusters"][0]["type"] = "SOMETIMES_DNS"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(static))
    assert _envoy_validate(envoy, bad).returncode != 0
