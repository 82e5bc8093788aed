"""``kymas``: the Kyma objects created before the first step.

Omitted: one KCP Kyma per SKR (``kcp-system/kyma-<skr>``, label
``kyma-project.io/runtime-id``, annotation ``skr-domain``) and one SKR Kyma
``kyma-system/default`` labelled ``operator.kyma-project.io/watched-by: kyma``, as
:func:`default_kymas` builds them. Given: exactly these Kymas, nothing else.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from harness.scenario.clusters import KCP, Skr
from harness.scenario.values import DnsLabel, Labels, Model
from watcher.domain import (
    KCP_NAMESPACE,
    LIFECYCLE_MANAGER,
    MANAGED_BY_LABEL,
    RUNTIME_ID_LABEL,
    SKR_DOMAIN_ANNOTATION,
    SKR_NAMESPACE,
    WATCHED_BY_LABEL,
)


class Kyma(Model):
    """One Kyma; ``namespace`` defaults to kcp-system in the KCP, kyma-system in an SKR."""

    cluster: DnsLabel
    name: DnsLabel
    namespace: DnsLabel | None = None
    labels: Labels = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    spec: dict[str, Any] = Field(default_factory=lambda: {"channel": "regular"})

    @property
    def effective_namespace(self) -> str:
        if self.namespace is not None:
            return self.namespace
        return KCP_NAMESPACE if self.cluster == KCP else SKR_NAMESPACE

    @property
    def key(self) -> str:
        """``namespace/name``."""
        return f"{self.effective_namespace}/{self.name}"

    def to_dict(self) -> dict[str, Any]:
        metadata: dict[str, Any] = {"name": self.name, "namespace": self.effective_namespace}
        if self.labels:
            metadata["labels"] = dict(self.labels)
        if self.annotations:
            metadata["annotations"] = dict(self.annotations)
        return {
            "apiVersion": "operator.kyma-project.io/v1beta2",
            "kind": "Kyma",
            "metadata": metadata,
            "spec": dict(self.spec),
        }


def default_kymas(skrs: tuple[Skr, ...]) -> tuple[Kyma, ...]:
    """What the harness creates when ``kymas`` is omitted (as :mod:`harness.environment`)."""
    out: list[Kyma] = []
    for skr in (s for s in skrs if s.kyma):
        out.append(
            Kyma(
                cluster=KCP,
                name=skr.kyma_name,
                namespace=KCP_NAMESPACE,
                labels={RUNTIME_ID_LABEL: skr.runtime_id},
                annotations={SKR_DOMAIN_ANNOTATION: skr.skr_domain},
            )
        )
        out.append(
            Kyma(
                cluster=skr.name,
                name="default",
                namespace=SKR_NAMESPACE,
                labels={
                    WATCHED_BY_LABEL: "kyma",
                    MANAGED_BY_LABEL: LIFECYCLE_MANAGER,
                    RUNTIME_ID_LABEL: skr.runtime_id,
                },
            )
        )
    return tuple(out)
