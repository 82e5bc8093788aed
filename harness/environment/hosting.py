"""Where the webhook runs and how the clusters reach this host, decided once per environment.

The host address (``EnvironmentSpec.host_address``, else ``WATCHER_HARNESS_HOST_ADDRESS``,
else the backend's default — kind: its network's gateway —, else ``127.0.0.1``) is what
API servers dial for a host-run webhook (url clientConfig, a SAN of its certificate) and
what in-cluster webhooks dial for the gateway (``KCP_ADDR``, a SAN of the gateway's
certificate). ``WATCHER_HARNESS_WEBHOOK_MODE`` picks the installation: a process here
(:class:`SkrInstallation`) or the image in the SKR (:class:`InClusterSkrInstallation`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from harness.clusters.plane import Cluster, ClusterBackend
from harness.clusters.ports import LOOPBACK
from harness.environment.spec import EnvironmentSpec, SkrSpec
from harness.skr.base import SkrRuntime
from harness.skr.errors import SkrInstallError
from harness.skr.install import SkrInstallation
from watcher import pki

ENV_IMAGE = "WATCHER_HARNESS_IMAGE"
ANY_ADDRESS = "0.0.0.0"  # in-cluster webhooks reach the gateway from their pods


async def resolve_host_address(spec: EnvironmentSpec, backend: ClusterBackend) -> str:
    """The spec's, the backend choice's, the kind network's gateway, or loopback."""
    if spec.host_address:
        return spec.host_address
    if spec.backend.host_address:
        return spec.backend.host_address
    from harness.clusters.kind import KindBackend

    if isinstance(backend, KindBackend):
        return await backend.host_address()
    return LOOPBACK


def in_cluster(spec: EnvironmentSpec) -> bool:
    return spec.backend.webhook_mode == "in-cluster"


def gateway_listen_address(spec: EnvironmentSpec) -> str:
    """Loopback, unless in-cluster webhooks must reach the gateway from their pods."""
    return ANY_ADDRESS if in_cluster(spec) else LOOPBACK


def extra_san(host_address: str) -> str | None:
    """``host_address`` as an extra certificate SAN (None for loopback)."""
    return None if host_address == LOOPBACK else host_address


def skr_installation(
    spec: EnvironmentSpec,
    skr: SkrSpec,
    cluster: Cluster,
    *,
    ca: pki.CertificateAuthority,
    leaf: pki.Issued,
    ca_bundle_pem: bytes,
    gateway_port: int,
    host_address: str,
    env: Mapping[str, str] | None = None,
) -> SkrInstallation:
    """The installation of ``skr`` in the spec's webhook mode, starting with ``leaf`` (the
    certificate KLM issued for it) and trusting ``ca_bundle_pem``."""
    runtime = SkrRuntime(
        runtime_id=skr.runtime_id,
        skr_domain=skr.skr_domain,
        ca=ca,
        ca_bundle_pem=ca_bundle_pem,
        certificate=skr.certificate,
        leaf=leaf,
    )
    if in_cluster(spec):
        from harness.skr.in_cluster import InClusterSkrInstallation

        if spec.webhook_env or spec.delivery_mode_of(skr) != "async":
            raise SkrInstallError(
                f"SKR {skr.name}: the in-cluster webhook runs the rendered Deployment, which "
                "takes no webhook_env or sync delivery_mode; run this scenario with "
                "WATCHER_HARNESS_WEBHOOK_MODE=host"
            )

        image = (os.environ if env is None else env).get(ENV_IMAGE, "")
        kcp_addr = f"{host_address}:{gateway_port}"
        return InClusterSkrInstallation(cluster, kcp_addr=kcp_addr, image=image, **runtime)
    return SkrInstallation(
        cluster,
        kcp_addr=f"{LOOPBACK}:{gateway_port}",
        delivery_mode=spec.delivery_mode_of(skr),
        log_level="WARNING",
        extra_env=dict(spec.webhook_env),
        log_dir=spec.log_dir,
        host_address=host_address,
        bind_host=spec.backend.host_bind,
        command=spec.backend.webhook_command,
        isolation=spec.backend.webhook_isolation,
        attached=skr.create_kyma,
        **runtime,
    )
