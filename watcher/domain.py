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
