"""When kube-apiserver stops holding creates of a new CRD's objects (pure), and that the
wait for it really ends the hold (a real API server)."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

import pytest
from kubernetes_asyncio.client import ApiClient

from harness.clusters.binaries import Binaries
from harness.clusters.plane import LocalBackend
from harness.kube import KYMAS, KubeError, request
from harness.kube.crds import CREATE_HOLD_S, apply_crds, creatable_at, wait_creatable

CRD_DIR = Path(__file__).resolve().parents[3] / "fixtures" / "crds"


def crd(*conditions: dict[str, str]) -> dict[str, object]:
    return {"status": {"conditions": list(conditions)}}


def test_creatable_two_seconds_after_established_by_its_own_clock() -> None:
    established = {
        "type": "Established",
        "status": "True",
        "lastTransitionTime": "2026-11-28T10:24:31Z",
    }
    names_accepted = {"type": "NamesAccepted", "status": "True", "lastTransitionTime": "x"}
    at = creatable_at(crd(names_accepted, established))
    assert at == 1795861471.0 + CREATE_HOLD_S


@pytest.mark.parametrize(
    "conditions",
    [
        (),
        ({"type": "Established", "status": "False", "lastTransitionTime": "2026-11-28T10:24:31Z"},),
    ],
)
def test_not_established_holds_nothing_to_wait_for(conditions: tuple[dict[str, str], ...]) -> None:
    assert creatable_at(crd(*conditions)) == 0.0


async def dry_run_create_seconds(api: ApiClient, namespace: str) -> float:
    body = {"apiVersion": KYMAS.api_version, "kind": "Kyma", "metadata": {"name": "k"}}
    started = time.monotonic()
    with contextlib.suppress(KubeError):  # refused or not, it went through the handler
        await request(api, "POST", KYMAS.path(namespace), query=[("dryRun", "All")], body=body)
    return time.monotonic() - started


@pytest.mark.e2e
async def test_a_new_crds_first_create_is_held_unless_waited_for(
    cluster_binaries: Binaries,
) -> None:
    backend = LocalBackend(cluster_binaries)
    async with (
        backend.start(["kcp", "skr"]) as env,
        env["kcp"].api_client() as held,
        env["skr"].api_client() as waited,
    ):
        await apply_crds(held, [CRD_DIR / "kyma.yaml"])
        assert await dry_run_create_seconds(held, "default") >= CREATE_HOLD_S * 0.9
        await wait_creatable(waited, await apply_crds(waited, [CRD_DIR / "kyma.yaml"]))
        assert await dry_run_create_seconds(waited, "default") < CREATE_HOLD_S / 2
