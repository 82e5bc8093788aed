"""The SKR install bundle: the webhook's Secret, Services and Deployment.

Pure. Shaped as KLM installs the upstream webhook into every SKR (reference §2): the TLS
Secret ``skr-webhook-tls`` mounted at ``/app/etc/ssl``, Service ``skr-webhook`` 443→8443,
a metrics Service on 2112, and a locked-down single-replica Deployment. Objects are
returned in apply order (Secret, Services, Deployment).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from watcher.domain import MANAGED_BY_LABEL
from watcher.errors import CertificateError

NAME = "skr-webhook"
NAMESPACE = "kyma-system"
TLS_SECRET = "skr-webhook-tls"
SSL_DIR = "/app/etc/ssl"
WEBHOOK_PORT = 8443
METRICS_PORT = 2112
SECRET_KEYS = ("tls.crt", "tls.key", "ca.crt")
NON_ROOT_UID = 65532


@dataclass(frozen=True)
class SkrBundleSettings:
    """Knobs of the bundle; the defaults are upstream's."""

    namespace: str = NAMESPACE
    name: str = NAME
    tls_secret: str = TLS_SECRET
    contract: str = "v2"
    image_pull_policy: str = "IfNotPresent"
    health_path: str | None = None
    """Path of the liveness probe (and of the readiness probe unless ``readiness_path`` is
    set); ``None`` probes the TLS port with a TCP connect."""
    readiness_path: str | None = None
    probe_port: str = "https"
    """Named container port the HTTP probes use (``metrics`` serves ``/healthz``)."""
    probe_scheme: Literal["HTTP", "HTTPS"] = "HTTPS"
    cpu_request: str = "10m"
    memory_request: str = "32Mi"
    memory_limit: str = "128Mi"
    cpu_limit: str | None = None
    run_as_user: int = NON_ROOT_UID
    run_as_group: int = NON_ROOT_UID
    service_account: str | None = None
    """``None`` runs under the namespace's default ServiceAccount (no token is mounted)."""
    priority_class: str | None = None
    writable_tmp: bool = False
    """Mount an emptyDir at ``/tmp``: the only writable path under a read-only root."""
    extra_env: tuple[tuple[str, str], ...] = ()


def _labels(settings: SkrBundleSettings) -> dict[str, str]:
    return {
        "app": settings.name,
        "app.kubernetes.io/name": settings.name,
        "app.kubernetes.io/component": "runtime-watcher",
        MANAGED_BY_LABEL: "lifecycle-manager",
    }


def tls_secret(
    data: Mapping[str, bytes], settings: SkrBundleSettings = SkrBundleSettings()
) -> dict[str, Any]:
    """Secret ``skr-webhook-tls`` (kubernetes.io/tls) from ``{tls.crt, tls.key, ca.crt}`` PEM."""
    missing = [k for k in SECRET_KEYS if not data.get(k)]
    if missing:
        raise CertificateError(f"TLS secret data lacks {', '.join(missing)}")
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": settings.tls_secret,
            "namespace": settings.namespace,
            "labels": _labels(settings),
        },
        "type": "kubernetes.io/tls",
        "data": {k: base64.b64encode(data[k]).decode("ascii") for k in SECRET_KEYS},
    }


def _service(
    name: str, port: int, target: int, port_name: str, settings: SkrBundleSettings
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": settings.namespace, "labels": _labels(settings)},
        "spec": {
            "type": "ClusterIP",
            "selector": {"app": settings.name},
            "ports": [{"name": port_name, "port": port, "targetPort": target, "protocol": "TCP"}],
        },
    }


def _probe(settings: SkrBundleSettings, period: int, path: str | None) -> dict[str, Any]:
    action: dict[str, Any]
    if path:
        action = {
            "httpGet": {"path": path, "port": settings.probe_port, "scheme": settings.probe_scheme}
        }
    else:
        action = {"tcpSocket": {"port": "https"}}
    return {**action, "periodSeconds": period, "timeoutSeconds": 2, "failureThreshold": 3}


def deployment(
    *, image: str, kcp_addr: str, settings: SkrBundleSettings = SkrBundleSettings()
) -> dict[str, Any]:
    """Deployment ``kyma-system/skr-webhook``: one non-root, read-only replica."""
    if not image:
        raise ValueError("image must not be empty")
    if not kcp_addr or "/" in kcp_addr:
        raise ValueError(f"kcp_addr must be <host>:<port>, got {kcp_addr!r}")
    labels = _labels(settings)
    env = {
        "WEBHOOK_PORT": str(WEBHOOK_PORT),
        "METRICS_PORT": str(METRICS_PORT),
        "TLS_CERT": f"{SSL_DIR}/tls.crt",
        "TLS_KEY": f"{SSL_DIR}/tls.key",
        "CA_CERT": f"{SSL_DIR}/ca.crt",
        "KCP_ADDR": kcp_addr,
        "KCP_CONTRACT": settings.contract,
        **dict(settings.extra_env),
    }
    limits = {"memory": settings.memory_limit}
    if settings.cpu_limit:
        limits["cpu"] = settings.cpu_limit
    mounts: list[dict[str, Any]] = [{"name": "ssl", "mountPath": SSL_DIR, "readOnly": True}]
    volumes: list[dict[str, Any]] = [
        {"name": "ssl", "secret": {"secretName": settings.tls_secret, "defaultMode": 0o440}}
    ]
    if settings.writable_tmp:
        mounts.append({"name": "tmp", "mountPath": "/tmp"})
        volumes.append({"name": "tmp", "emptyDir": {"sizeLimit": "16Mi"}})
    container = {
        "name": "server",
        "image": image,
        "imagePullPolicy": settings.image_pull_policy,
        "env": [{"name": k, "value": v} for k, v in env.items()],
        "ports": [
            {"name": "https", "containerPort": WEBHOOK_PORT, "protocol": "TCP"},
            {"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"},
        ],
        "resources": {
            "requests": {"cpu": settings.cpu_request, "memory": settings.memory_request},
            "limits": limits,
        },
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "privileged": False,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "runAsUser": settings.run_as_user,
            "runAsGroup": settings.run_as_group,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "volumeMounts": mounts,
        "readinessProbe": _probe(settings, 5, settings.readiness_path or settings.health_path),
        "livenessProbe": _probe(settings, 10, settings.health_path),
    }
    pod: dict[str, Any] = {
        "automountServiceAccountToken": False,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": settings.run_as_user,
            "runAsGroup": settings.run_as_group,
            "fsGroup": settings.run_as_group,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [container],
        "volumes": volumes,
    }
    if settings.service_account:
        pod["serviceAccountName"] = settings.service_account
    if settings.priority_class:
        pod["priorityClassName"] = settings.priority_class
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": settings.name, "namespace": settings.namespace, "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": settings.name}},
            "template": {
                "metadata": {"labels": labels},
                "spec": pod,
            },
        },
    }


def render_skr_bundle(
    *,
    image: str,
    kcp_addr: str,
    tls: Mapping[str, bytes],
    settings: SkrBundleSettings = SkrBundleSettings(),
) -> list[dict[str, Any]]:
    """Secret, webhook Service, metrics Service and Deployment, in apply order.

    ``kcp_addr`` is the KCP gateway's ``<host>:<port>``; ``tls`` the PEM bytes of
    ``tls.crt``, ``tls.key`` and ``ca.crt`` (see ``watcher.pki.secret_data``).
    """
    return [
        tls_secret(tls, settings),
        _service(settings.name, 443, WEBHOOK_PORT, "https", settings),
        _service(f"{settings.name}-metrics", METRICS_PORT, METRICS_PORT, "metrics", settings),
        deployment(image=image, kcp_addr=kcp_addr, settings=settings),
    ]
