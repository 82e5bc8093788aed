"""``modules``: the KCP's module catalog, created before the first step.

Each entry becomes one ModuleTemplate per version (``<module>-<version>``) and one
ModuleReleaseMeta (``<module>``) with its channels, in ``kcp-system``, where the Lifecycle
Manager finds them (``harness.kcp.lifecycle_manager.kyma.modules.catalog_fixture`` builds them).
``install: fail`` makes the module's Manifests end ``Error`` (the broken-module fixture);
``labels`` (``operator.kyma-project.io/internal`` or ``beta``) restrict which Kymas see
the module.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from harness.scenario.values import DnsLabel, Labels, Model


class Module(Model):
    name: DnsLabel
    channels: dict[DnsLabel, str] = Field(min_length=1)
    """Channel → version, e.g. ``{regular: 1.0.0, fast: 1.1.0}``."""
    install: Literal["ok", "fail"] = "ok"
    labels: Labels = Field(default_factory=dict)
