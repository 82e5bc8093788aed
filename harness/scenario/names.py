"""Names made unique per run, so the same scenario can run several times in parallel.

Pure. Object names inside a scenario's clusters stay as written: with the ``local`` and
``kind`` backends every run owns its clusters, so names cannot collide. What the machine
shares is suffixed with the run: cluster names (work and log directories, kubeconfig
contexts, kind cluster names), the report directory, and a label on every object the run
creates (how the ``kubeconfig`` backend, whose clusters are shared, finds and deletes a
run's objects).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from harness.scenario.clusters import KCP
from harness.scenario.model import Scenario

RUN_LABEL = "watcher-harness.kyma-project.io/run"
MAX_LABEL = 63


def _label(text: str) -> str:
    """``text`` as a DNS label: lower case, other characters → '-', long ones hashed."""
    cleaned = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-") or "x"
    if len(cleaned) <= MAX_LABEL:
        return cleaned
    digest = hashlib.sha256(cleaned.encode()).hexdigest()[:8]
    return f"{cleaned[: MAX_LABEL - 9].rstrip('-')}-{digest}"


@dataclass(frozen=True)
class InstanceNames:
    """The per-run names of one scenario run."""

    run: str  # "<scenario>-<run id>", a DNS label
    clusters: Mapping[str, str]  # logical cluster name (kcp, skr-a, ...) → per-run name
    labels: Mapping[str, str]  # put on every object the run creates

    def cluster(self, logical: str) -> str:
        return self.clusters[logical]


def instance_names(scenario: Scenario, run_id: str) -> InstanceNames:
    """Deterministic: the same scenario and ``run_id`` give the same names; different run
    ids give different names. Every name is a DNS label (at most 63 characters)."""
    rid = _label(run_id)
    run = _label(f"{scenario.name}-{rid}")
    clusters = {
        name: _label(f"{run}-{name}") for name in (KCP, *(s.name for s in scenario.clusters.skrs))
    }
    return InstanceNames(
        run=run,
        clusters=MappingProxyType(clusters),
        labels=MappingProxyType({RUN_LABEL: run}),
    )


def kubeconfig_variable(cluster: str) -> str:
    """The environment variable a ``script`` finds ``cluster``'s kubeconfig file in:
    ``skr-a`` → ``KUBECONFIG_SKR_A``."""
    return "KUBECONFIG_" + cluster.upper().replace("-", "_")
