"""KLM's certificates against a real KCP: the gateway Secret through a rotation, and each
Kyma's client certificate issued, kept, re-issued and forgotten."""

from __future__ import annotations

import base64
import datetime as dt

import pytest

from harness.clusters.plane import Cluster
from harness.kcp.lifecycle_manager.certificates.client import (
    ISSUER_ANNOTATION,
    KymaCertificates,
    secret_name,
)
from harness.kcp.lifecycle_manager.certificates.gateway_secret import (
    SERVING_CA_ANNOTATION,
    GatewaySecretManager,
    RotationError,
)
from harness.kcp.lifecycle_manager.certificates.policy import CertificateTimings
from harness.kube import SECRETS, get, merge_patch
from watcher import pki
from watcher.domain import CA_ADDED_ANNOTATION, GATEWAY_SECRET_NAME, ISTIO_NAMESPACE

pytestmark = pytest.mark.e2e
TIMINGS = CertificateTimings(grace=dt.timedelta(seconds=30))


class Clock:
    """Real time plus an offset the test moves forward."""

    def __init__(self) -> None:
        self.offset = dt.timedelta(0)

    def __call__(self) -> dt.datetime:
        return dt.datetime.now(dt.UTC) + self.offset


def server_certificate(ca: pki.CertificateAuthority) -> pki.Issued:
    return pki.issue_server_certificate(ca, "kcp-gateway")


def decoded(secret: dict[str, object] | None, key: str) -> bytes:
    assert secret is not None
    data = secret["data"]
    assert isinstance(data, dict)
    return base64.b64decode(data[key])


async def test_the_gateway_secret_through_a_rotation(kcp: Cluster) -> None:
    clock = Clock()
    confirmed: list[bytes] = []

    async def confirm(bundle: bytes) -> None:
        confirmed.append(bundle)

    async with (
        kcp.api_client() as api,
        GatewaySecretManager(
            api,
            server_certificate=server_certificate,
            timings=TIMINGS,
            confirm=confirm,
            clock=clock,
        ) as cas,
    ):
        secret = await get(api, SECRETS, GATEWAY_SECRET_NAME, ISTIO_NAMESPACE)
        assert secret is not None
        assert secret["metadata"]["annotations"][SERVING_CA_ANNOTATION] == "kcp-ca-1"
        assert decoded(secret, "ca.crt") == cas.cas[0].cert_pem
        first_added = secret["metadata"]["annotations"][CA_ADDED_ANNOTATION]

        with pytest.raises(RotationError, match="no old CA to drop"):
            await cas.drop_old()
        new = await cas.rotate()
        assert confirmed == [cas.bundle_pem] and cas.issuing_ca is new
        secret = await get(api, SECRETS, GATEWAY_SECRET_NAME, ISTIO_NAMESPACE)
        annotations = secret["metadata"]["annotations"] if secret else {}
        assert [c.common_name for c in cas.cas] == ["kcp-ca-2", "kcp-ca-1"]  # newest first
        assert decoded(secret, "ca.crt") == new.cert_pem + cas.cas[1].cert_pem
        assert annotations[CA_ADDED_ANNOTATION] >= first_added
        assert annotations[SERVING_CA_ANNOTATION] == "kcp-ca-1"  # within the grace period
        with pytest.raises(RotationError, match="still serves a certificate of kcp-ca-1"):
            await cas.drop_old()

        clock.offset = TIMINGS.grace + dt.timedelta(seconds=1)
        await cas.tick()
        secret = await get(api, SECRETS, GATEWAY_SECRET_NAME, ISTIO_NAMESPACE)
        assert secret is not None
        assert secret["metadata"]["annotations"][SERVING_CA_ANNOTATION] == "kcp-ca-2"
        served = pki.load_certificates(decoded(secret, "tls.crt"))[0]
        assert served.issuer == new.certificate.subject
        await cas.drop_old()
        secret = await get(api, SECRETS, GATEWAY_SECRET_NAME, ISTIO_NAMESPACE)
        assert decoded(secret, "ca.crt") == new.cert_pem


async def test_client_certificates_follow_the_ca_and_the_kyma(kcp: Cluster) -> None:
    async with (
        kcp.api_client() as api,
        GatewaySecretManager(api, server_certificate=server_certificate) as cas,
    ):
        certs = KymaCertificates(api, cas, pinned=["kyma-pinned"])

        def not_renewed(kyma: str) -> float:
            name = "lifecycle_mgr_self_signed_cert_not_renew"
            return certs.metrics.value(name, {"kyma_name": kyma})

        first = await certs.ensure("kyma-a", "runtime-a", "a.example.com")
        assert first.reissued == "there is none"
        assert first.issued.common_name == "runtime-a"
        stored = await get(api, SECRETS, secret_name("kyma-a"), ISTIO_NAMESPACE)
        assert stored is not None
        assert stored["metadata"]["annotations"][ISSUER_ANNOTATION] == "kcp-ca-1"
        again = await certs.ensure("kyma-a", "runtime-a", "a.example.com")
        assert again.reissued is None
        assert again.issued.cert_pem == first.issued.cert_pem  # read back from the Secret
        pinned = await certs.ensure("kyma-pinned", "runtime-p", "p.example.com")

        await cas.rotate()
        assert not_renewed("kyma-a") == 1  # due, not yet renewed
        renewed = await certs.ensure("kyma-a", "runtime-a", "a.example.com")
        # issued before caAddedToBundleAt — or, within the same second, by the old CA
        assert renewed.reissued is not None
        assert "caAddedToBundleAt" in renewed.reissued or "kcp-ca-2" in renewed.reissued
        assert renewed.ca_bundle_pem == cas.bundle_pem  # trusts both gateway CAs
        assert not_renewed("kyma-a") == 0
        kept = await certs.ensure("kyma-pinned", "runtime-p", "p.example.com")
        assert kept.reissued is None and kept.issued.cert_pem == pinned.issued.cert_pem

        moved = await certs.ensure("kyma-a", "runtime-a", "moved.example.com")
        assert "skr-domain" in (moved.reissued or "")
        certs.renew("kyma-a")
        forced = await certs.ensure("kyma-a", "runtime-a", "moved.example.com")
        assert forced.reissued == "a renewal was asked for"

        broken = {"data": {"tls.key": base64.b64encode(b"not a key").decode()}}
        await merge_patch(api, SECRETS, secret_name("kyma-a"), ISTIO_NAMESPACE, broken)
        repaired = await certs.ensure("kyma-a", "runtime-a", "moved.example.com")
        assert "unusable" in (repaired.reissued or "")

        certs.forget("kyma-a")  # the Kyma is gone: so is its series
        registry = certs.metrics.registry
        name = "lifecycle_mgr_self_signed_cert_not_renew"
        assert registry.get_sample_value(name, {"kyma_name": "kyma-a"}) is None
        assert registry.get_sample_value(name, {"kyma_name": "kyma-pinned"}) == 0
