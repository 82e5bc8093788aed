"""Kyma's own names, each defined once: the namespaces, labels and annotations that KLM,
the watcher and the SKR share (``../shared/spec/klm-reference.md``). Pure constants."""

from __future__ import annotations

from typing import Final

KCP_NAMESPACE: Final = "kcp-system"
"""Where KLM keeps Kymas, Watchers and Manifests in the KCP."""
SKR_NAMESPACE: Final = "kyma-system"
"""Where the SKR Kyma (``default``) and the watcher's SKR resources live."""

RUNTIME_ID_LABEL: Final = "kyma-project.io/runtime-id"
"""On a KCP Kyma: the runtime id, the CN of its SKR's client certificate."""
WATCHED_BY_LABEL: Final = "operator.kyma-project.io/watched-by"
"""On an SKR Kyma: ``kyma`` puts it under KLM's default Watcher."""
MANAGED_BY_LABEL: Final = "operator.kyma-project.io/managed-by"
"""On a Watcher: its manager when ``spec.manager`` is empty; on KLM's own objects:
``lifecycle-manager``."""
SKIP_RECONCILIATION_LABEL: Final = "operator.kyma-project.io/skip-reconciliation"
"""``"true"`` on a KCP Kyma stops its reconciles (deletion still proceeds)."""
SKR_DOMAIN_ANNOTATION: Final = "skr-domain"
"""On a KCP Kyma: the domain its SKR's client certificate must name (SAN pinning)."""

KYMA_NAME_LABEL: Final = "operator.kyma-project.io/kyma-name"
"""On a KCP Manifest and the SKR kubeconfig Secret: the Kyma it belongs to."""
MODULE_NAME_LABEL: Final = "operator.kyma-project.io/module-name"
"""On a KCP Manifest: the module it installs."""
INTERNAL_LABEL: Final = "operator.kyma-project.io/internal"
"""``"true"`` on a ModuleTemplate or Kyma: internal modules reach only internal Kymas."""
BETA_LABEL: Final = "operator.kyma-project.io/beta"
"""``"true"`` on a ModuleTemplate or Kyma: beta modules reach only beta Kymas."""
KYMA_FINALIZER: Final = "operator.kyma-project.io/Kyma"
"""On a KCP Kyma: KLM cleans up its Manifests and SKR objects before it goes."""
SKR_KYMA_NAME: Final = "default"
"""The SKR Kyma's name (in ``SKR_NAMESPACE``): the user's desired state."""
KUBECONFIG_KEY: Final = "config"
"""The key of the SKR kubeconfig in the KCP Secret ``kcp-system/<kyma>``."""
LIFECYCLE_MANAGER: Final = "lifecycle-manager"
"""KLM's manager name (``managed-by`` value, Watcher manager, listener component)."""
ISTIO_NAMESPACE: Final = "istio-system"
"""Where KLM keeps the gateway's Secret and the per-Kyma client certificates in the KCP."""
GATEWAY_SECRET_NAME: Final = "klm-istio-gateway"
"""The gateway's Secret: serving certificate and the bundle of every unexpired CA."""
CA_ADDED_ANNOTATION: Final = "caAddedToBundleAt"
"""On the gateway Secret: when the newest CA entered the bundle (RFC 3339, seconds)."""
CLIENT_CERTIFICATE_SUFFIX: Final = "-webhook-tls"
"""A Kyma's client certificate Secret in the KCP is ``<kyma>-webhook-tls``."""
