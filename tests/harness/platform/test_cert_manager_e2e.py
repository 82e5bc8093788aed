"""The harness's cert-manager against one real KCP API server (no cert-manager installed):
KLM's chain (selfSigned → CA Certificate → CA Issuer → leaf), every re-issue trigger KLM
relies on, an Issuer whose CA Secret comes late, and a CA rotation that re-issues nothing."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from kubernetes_asyncio.client import ApiClient

from harness.clusters.binaries import Binaries
from harness.clusters.plane import Cluster, LocalBackend
from harness.kube import SECRETS, create, delete, ensure_namespace, get, merge_patch
from harness.kube.crds import apply_crds
from harness.platform.cert_manager import CERTIFICATES, ISSUERS, CertManager, CertManagerError
from watcher import pki

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(120)]

CRDS = Path(__file__).resolve().parents[3] / "fixtures" / "platform" / "cert-manager.yaml"
KLM_SUBJECT = {
    "organizationalUnits": ["BTP Kyma Runtime"],
    "organizations": ["SAP SE"],
    "localities": ["Walldorf"],
    "provinces": ["Baden-Wuerttemberg"],
    "countries": ["DE"],
}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def kcp(
    cluster_binaries: Binaries, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Cluster]:
    """One KCP API server for the module, with cert-manager's CRDs and no cert-manager."""
    logs = tmp_path_factory.mktemp("kcp-logs")
    async with LocalBackend(cluster_binaries, log_dir=logs).start(["kcp"]) as env:
        async with env["kcp"].api_client() as api:
            await apply_crds(api, [CRDS])
        yield env["kcp"]


def issuer(name: str, namespace: str, **spec: Any) -> dict[str, Any]:
    meta = {"name": name, "namespace": namespace}
    return {"apiVersion": "cert-manager.io/v1", "kind": "Issuer", "metadata": meta, "spec": spec}


def certificate(name: str, namespace: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "cert-manager.io/v1",
        "kind": "Certificate",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"secretName": f"{name}-tls", **spec},
    }


def data(secret: dict[str, Any] | None, key: str) -> bytes:
    assert secret is not None, "the Secret does not exist"
    return base64.b64decode(secret["data"][key])


def cert_of(secret: dict[str, Any] | None) -> x509.Certificate:
    return x509.load_pem_x509_certificate(data(secret, "tls.crt"))


def public(certificate: x509.Certificate) -> bytes:
    der, spki = serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    return certificate.public_key().public_bytes(der, spki)


def condition(obj: dict[str, Any] | None, kind: str) -> dict[str, Any]:
    """The condition, or ``{"reason": None}`` when the object has none of that type."""
    assert obj is not None
    found = [c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == kind]
    return found[0] if found else {"reason": None}


def rfc3339(moment: dt.datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


async def issuer_ready(api: ApiClient, name: str, namespace: str, reason: str) -> dict[str, Any]:
    """The Issuer's Ready condition, once its reason is ``reason``."""
    deadline = time.monotonic() + 15
    while True:
        cond = condition(await get(api, ISSUERS, name, namespace), "Ready")
        if cond["reason"] == reason:
            return cond
        assert time.monotonic() < deadline, f"Issuer {name}: {cond}, not {reason}"
        await asyncio.sleep(0.05)


async def set_issuing(api: ApiClient, name: str, namespace: str) -> None:
    """KLM's manual renewal: Issuing=True through the status subresource, others kept."""
    current = await get(api, CERTIFICATES, name, namespace)
    assert current is not None
    conditions = [c for c in current["status"]["conditions"] if c["type"] != "Issuing"]
    conditions.append(
        {
            "type": "Issuing",
            "status": "True",
            "reason": "ManuallyTriggered",
            "message": "Certificate re-issuance manually triggered",
            "lastTransitionTime": rfc3339(dt.datetime.now(dt.UTC)),
        }
    )
    patch = {
        "metadata": {"resourceVersion": current["metadata"]["resourceVersion"]},
        "status": {"conditions": conditions},
    }
    await merge_patch(api, CERTIFICATES, name, namespace, patch, subresource="status")


def no_tasks_left() -> None:
    left = [t for t in asyncio.all_tasks() if t.get_name().startswith("cert-manager")]
    assert not left, f"the controller left tasks behind: {left}"


async def test_klms_chain_and_every_reissue_trigger(kcp: Cluster) -> None:
    ns = "istio-system"
    async with kcp.api_client() as api, CertManager(api) as cm:
        await ensure_namespace(api, ns)
        await create(api, ISSUERS, issuer("klm-root", ns, selfSigned={}))
        ca_spec = {"commonName": "klm-watcher-selfsigned-ca", "isCA": True, "subject": KLM_SUBJECT}
        ca_spec |= {"duration": "2160h", "renewBefore": "1464h", "issuerRef": {"name": "klm-root"}}
        ca_spec["privateKey"] = {"algorithm": "RSA", "size": 4096}  # KLM's, the one RSA-4096
        await create(api, CERTIFICATES, certificate("klm-ca", ns, **ca_spec))
        await create(api, ISSUERS, issuer("klm-ca", ns, ca={"secretName": "klm-ca-tls"}))
        leaf_spec: dict[str, Any] = {
            "commonName": "runtime-1",
            "subject": KLM_SUBJECT,
            "dnsNames": ["skr.example.com", "skr-webhook.kyma-system.svc"],
            "ipAddresses": ["127.0.0.1"],
            "uris": ["spiffe://kyma/runtime-1"],
            "duration": "2160h",
            "renewBefore": "1440h",
            "usages": ["digital signature", "key encipherment", "server auth", "client auth"],
            "issuerRef": {"name": "klm-ca", "kind": "Issuer", "group": "cert-manager.io"},
            "secretTemplate": {"labels": {"operator.kyma-project.io/managed-by": "klm"}},
        }
        await create(api, CERTIFICATES, certificate("runtime-1", ns, **leaf_spec))

        # -- the CA: self-signed, its own ca.crt; both issuers Ready --------------------------
        await cm.wait_issued(ns, "klm-ca", within=60)
        ca_secret = await get(api, SECRETS, "klm-ca-tls", ns)
        ca = cert_of(ca_secret)
        assert ca.issuer == ca.subject and data(ca_secret, "ca.crt") == data(ca_secret, "tls.crt")
        assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
        await issuer_ready(api, "klm-root", ns, "IsReady")
        cond = await issuer_ready(api, "klm-ca", ns, "KeyPairVerified")
        assert (cond["status"], cond["message"]) == ("True", "Signing CA verified")

        # -- the leaf, signed by the CA; Secret and status as cert-manager writes them --------
        leaf = await cm.wait_issued(ns, "runtime-1", within=60)
        secret = await get(api, SECRETS, "runtime-1-tls", ns)
        first = cert_of(secret)
        first.verify_directly_issued_by(ca)
        assert isinstance(first.signature_hash_algorithm, hashes.SHA512)  # from the CA's key
        assert secret is not None and secret["type"] == "kubernetes.io/tls"
        assert data(secret, "ca.crt") == data(ca_secret, "tls.crt")
        assert data(secret, "tls.key").startswith(b"-----BEGIN RSA PRIVATE KEY-----")
        key = serialization.load_pem_private_key(data(secret, "tls.key"), password=None)
        assert isinstance(key, rsa.RSAPrivateKey) and key.key_size == 2048
        annotations = secret["metadata"]["annotations"]
        assert annotations == {
            "cert-manager.io/certificate-name": "runtime-1",
            "cert-manager.io/issuer-name": "klm-ca",
            "cert-manager.io/issuer-kind": "Issuer",
            "cert-manager.io/issuer-group": "cert-manager.io",
            "cert-manager.io/common-name": "runtime-1",
            "cert-manager.io/alt-names": "skr.example.com,skr-webhook.kyma-system.svc",
            "cert-manager.io/ip-sans": "127.0.0.1",
            "cert-manager.io/uri-sans": "spiffe://kyma/runtime-1",
        }
        assert secret["metadata"]["labels"] == {
            "operator.kyma-project.io/managed-by": "klm",
            "controller.cert-manager.io/fao": "true",
        }
        status = leaf["status"]
        validity = (first.not_valid_before_utc, first.not_valid_after_utc)
        assert (status["notBefore"], status["notAfter"]) == tuple(map(rfc3339, validity))
        renewal = first.not_valid_after_utc - dt.timedelta(hours=1440)
        assert status["revision"] == 1 and status["renewalTime"] == rfc3339(renewal)
        ready = condition(leaf, "Ready")
        assert ready["lastTransitionTime"] and ready["observedGeneration"] == 1
        assert (ready["status"], ready["reason"]) == ("True", "Ready")
        assert ready["message"] == "Certificate is up to date and has not expired"

        # -- KLM's manual renewal: revision 2, a new key, Issuing removed, foreign labels kept --
        await merge_patch(api, SECRETS, "runtime-1-tls", ns, {"metadata": {"labels": {"x": "y"}}})
        await set_issuing(api, "runtime-1", ns)
        renewed = await cm.wait_issued(ns, "runtime-1", revision=2)
        assert condition(renewed, "Issuing") == {"reason": None}
        secret = await get(api, SECRETS, "runtime-1-tls", ns)
        second = cert_of(secret)
        assert public(second) != public(first) and second.serial_number != first.serial_number
        assert secret is not None and secret["metadata"]["labels"]["x"] == "y"

        # -- a new dnsNames: revision 3 for generation 2 --------------------------------------
        names = ["moved.example.com"]
        await merge_patch(api, CERTIFICATES, "runtime-1", ns, {"spec": {"dnsNames": names}})
        moved = await cm.wait_issued(ns, "runtime-1", revision=3)
        third = cert_of(await get(api, SECRETS, "runtime-1-tls", ns))
        sans = third.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert sans.get_values_for_type(x509.DNSName) == names
        assert condition(moved, "Ready")["observedGeneration"] == 2

        # -- a deleted Secret comes back: revision 4 -----------------------------------------
        assert await delete(api, SECRETS, "runtime-1-tls", ns)
        await cm.wait_issued(ns, "runtime-1", revision=4)
        back = cert_of(await get(api, SECRETS, "runtime-1-tls", ns))
        assert back.serial_number != third.serial_number
        assert (cm.issued[f"{ns}/runtime-1"], cm.issued[f"{ns}/klm-ca"]) == (4, 1)

        # -- renewal at renewalTime with no event: duration 4 s, renewBefore 2 s --------------
        short: dict[str, Any] = {"commonName": "short", "duration": "4s", "renewBefore": "2s"}
        short |= {"issuerRef": {"name": "klm-ca"}, "privateKey": {"algorithm": "ECDSA"}}
        await create(api, CERTIFICATES, certificate("short", ns, **short))
        await cm.wait_issued(ns, "short")
        issued_at = time.monotonic()
        await cm.wait_issued(ns, "short", revision=2, within=8)
        elapsed = time.monotonic() - issued_at
        assert 0.5 <= elapsed <= 4.0, f"renewed {elapsed:.2f} s after issuance, not ~2 s"
        print(f"\nrenewed {elapsed:.2f} s after issuance (duration 4 s, renewBefore 2 s)")
    no_tasks_left()


async def test_a_late_ca_a_rotated_ca_and_what_is_left_alone(kcp: Cluster) -> None:
    ns = "app"
    async with kcp.api_client() as api, CertManager(api) as cm:
        await ensure_namespace(api, ns)
        await create(api, ISSUERS, issuer("late", ns, ca={"secretName": "late-ca"}))
        waiting_spec = {"dnsNames": ["waiting.example.com"], "issuerRef": {"name": "late"}}
        await create(api, CERTIFICATES, certificate("waiting", ns, **waiting_spec))

        # -- no CA Secret yet: the Issuer is not Ready, the Certificate waits saying why ------
        await issuer_ready(api, "late", ns, "ErrGetKeyPair")
        with pytest.raises(CertManagerError) as waited:
            await cm.wait_issued(ns, "waiting", within=1.0)
        said = str(waited.value)
        assert "Ready=False (DoesNotExist: Issuing certificate as Secret does not exist;" in said
        assert 'waiting for Issuer "late": ErrGetKeyPair: ' in said and 'secret "late-ca"' in said
        assert await get(api, SECRETS, "waiting-tls", ns) is None

        # -- the CA Secret appears: the Certificate issues -------------------------------------
        root = pki.create_ca("harness-root")
        tls = {"tls.crt": root.cert_pem, "tls.key": root.key_pem}
        ca_data = {k: base64.b64encode(v).decode() for k, v in tls.items()}
        meta = {"name": "late-ca", "namespace": ns}
        await create(
            api, SECRETS, {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "data": ca_data}
        )
        await cm.wait_issued(ns, "waiting")
        issued = await get(api, SECRETS, "waiting-tls", ns)
        cert_of(issued).verify_directly_issued_by(root.certificate)
        assert data(issued, "ca.crt") == root.cert_pem

        # -- the CA rotates: nothing is re-issued (cert-manager does not either) ---------------
        rotated = pki.create_ca("harness-root-2")
        tls = {"tls.crt": rotated.cert_pem, "tls.key": rotated.key_pem}
        new_data = {k: base64.b64encode(v).decode() for k, v in tls.items()}
        await merge_patch(api, SECRETS, "late-ca", ns, {"data": new_data})
        await asyncio.sleep(1.5)
        still = await get(api, SECRETS, "waiting-tls", ns)
        assert cm.issued[f"{ns}/waiting"] == 1 and data(still, "tls.crt") == data(issued, "tls.crt")
        assert data(still, "ca.crt") == root.cert_pem  # the old CA, until the leaf renews

        # -- a ClusterIssuer's Certificate is left alone; an invalid one says so on Ready ----
        foreign = {"commonName": "f", "issuerRef": {"name": "x", "kind": "ClusterIssuer"}}
        await create(api, CERTIFICATES, certificate("foreign", ns, **foreign))
        await create(api, CERTIFICATES, certificate("nameless", ns, issuerRef={"name": "late"}))
        deadline = time.monotonic() + 15
        while not condition(await get(api, CERTIFICATES, "nameless", ns), "Ready")["reason"]:
            assert time.monotonic() < deadline, "Certificate nameless: no Ready condition"
            await asyncio.sleep(0.05)
        ready = condition(await get(api, CERTIFICATES, "nameless", ns), "Ready")
        assert (ready["status"], ready["reason"]) == ("False", "InvalidSpec")
        assert "at least one of commonName" in ready["message"]
        assert not (await get(api, CERTIFICATES, "foreign", ns) or {}).get("status")
        assert await get(api, SECRETS, "foreign-tls", ns) is None
    no_tasks_left()
