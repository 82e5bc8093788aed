"""Lifecycle Manager's own metrics, named as upstream's (``docs/operator/operations.md``).

One registry per manager, read by scenarios as target ``klm``
(``{target: klm, name: lifecycle_mgr_self_signed_cert_not_renew, labels: {kyma_name: ...}}``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping

from prometheus_client import CollectorRegistry, Gauge

from watcher.exposition import summed_sample


class KlmMetrics:
    """``lifecycle_mgr_self_signed_cert_not_renew{kyma_name}``: 1 while a Kyma's client
    certificate is due to be issued again, 0 once it has been."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.cert_not_renewed = Gauge(
            "lifecycle_mgr_self_signed_cert_not_renew",
            "Indicates that the self-signed Certificate of a Kyma CR is not renewed yet.",
            ["kyma_name"],
            registry=self.registry,
        )

    def not_renewed(self, kyma: str, due: bool | None) -> None:
        """Set the Kyma's gauge (None: the Kyma is gone, so is its series)."""
        if due is not None:
            self.cert_not_renewed.labels(kyma_name=kyma).set(int(due))
            return
        with contextlib.suppress(KeyError):
            self.cert_not_renewed.remove(kyma)

    def value(self, name: str, labels: Mapping[str, str] | None = None) -> float:
        """One sample (0 when absent); labels not given are summed over."""
        return summed_sample(self.registry, name, labels)
