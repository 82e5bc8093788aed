"""harness.skr.fleet.SkrFleet: bookkeeping that needs no cluster."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.clusters.plane import Cluster
from harness.clusters.process import ProcessRecord
from harness.skr import SkrFleet, SkrInstallation, SkrInstallError
from watcher import pki


def cluster(name: str) -> Cluster:
    p = Path("/nonexistent")
    return Cluster(
        name=name,
        server="https://127.0.0.1:1",
        kubeconfig=p,
        ca_file=p,
        client_cert_file=p,
        client_key_file=p,
        process=ProcessRecord(name=name, argv=(), log_path=p),
        kubeconfig_embedded="",
    )


def installation(name: str, ca: pki.CertificateAuthority) -> SkrInstallation:
    return SkrInstallation(
        cluster(name),
        runtime_id=f"rt-{name}",
        skr_domain=f"{name}.example.com",
        ca=ca,
        ca_bundle_pem=ca.cert_pem,
        kcp_addr="127.0.0.1:1",
    )


async def test_fleet_refuses_two_installations_for_one_cluster() -> None:
    ca = pki.create_ca(key_type="ec")
    with pytest.raises(SkrInstallError, match="skr-a"):
        SkrFleet([installation("skr-a", ca), installation("skr-a", ca)])
    fleet = SkrFleet([installation("skr-a", ca), installation("skr-b", ca)])
    assert len(fleet) == 2 and [i.cluster.name for i in fleet] == ["skr-a", "skr-b"]
    assert fleet["skr-b"].runtime_id == "rt-skr-b"
    with pytest.raises(KeyError, match="have"):
        fleet["skr-c"]


async def test_an_installation_that_is_not_installed_says_so() -> None:
    inst = installation("skr-a", pki.create_ca(key_type="ec"))
    with pytest.raises(SkrInstallError, match="not installed"):
        inst.directory  # noqa: B018
    await inst.uninstall()  # nothing to undo
