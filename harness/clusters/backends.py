"""From a :class:`~harness.clusters.selection.BackendChoice` to a running cluster backend.

``local`` stays the default and is built exactly as before (cached binaries, one etcd,
one kube-apiserver per cluster). ``kubeconfig`` gets only file paths and context names.
``kind`` checks for the ``kind`` CLI and a Docker engine first and says what to install.

:func:`unsupported_reason` is the one place that knows what a backend cannot do, so the
runner can skip a scenario with that reason before anything starts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from harness.clusters.plane import ClusterBackend
from harness.clusters.selection import BackendChoice

PROCESS_FAULT_KINDS = frozenset({"apiserver"})
"""Fault targets that need the backend to own the cluster's processes."""


def unsupported_reason(choice: BackendChoice, fault_targets: Iterable[str]) -> str | None:
    """Why a scenario injecting ``fault_targets`` cannot run on ``choice`` (None: it can)."""
    if choice.name == "local":
        return None
    needing = sorted({t for t in fault_targets if t.partition("/")[0] in PROCESS_FAULT_KINDS})
    if needing:
        return (
            f"the {choice.name} backend does not own the clusters' API server processes, so "
            f"it cannot stop, kill or restart them (fault targets: {', '.join(needing)}); "
            "run this scenario on the local backend"
        )
    return None


def in_cluster_reason(
    choice: BackendChoice, *, rotates: bool, sync_skrs: Iterable[str]
) -> str | None:
    """Why a scenario cannot run with the in-cluster webhook (None: it can, or host mode)."""
    if choice.webhook_mode != "in-cluster":
        return None
    if rotates:
        return (
            "the in-cluster webhook cannot rotate certificates (a new Secret reaches the pod "
            "only on the kubelet's sync); run it with WATCHER_HARNESS_WEBHOOK_MODE=host"
        )
    sync = sorted(sync_skrs)
    if sync:
        return (
            f"the in-cluster webhook runs the rendered Deployment, which has no sync delivery "
            f"(SKRs: {', '.join(sync)}); run it with WATCHER_HARNESS_WEBHOOK_MODE=host"
        )
    return None


def open_backend(
    choice: BackendChoice,
    *,
    log_dir: Path | None = None,
    namespaces: Mapping[str, Sequence[str]] | None = None,
    crds: Mapping[str, Sequence[Path]] | None = None,
) -> ClusterBackend:
    """The backend ``choice`` names. ``namespaces`` (cluster → names) are the namespaces
    the harness installs into; backends on shared clusters create and remove them.
    Local clusters come from the process's :class:`~harness.clusters.pool.ClusterPool`
    when one is current (scenario items under ``--cluster-pool``).
    ``crds`` (cluster → CRD files) the caller will apply: the local backend creates them
    early, while its API servers start; the caller applies them all the same."""
    if choice.name == "kubeconfig":
        from harness.clusters.kubeconfig_backend import KubeconfigBackend

        return KubeconfigBackend(choice.target, run_id=choice.run_id, namespaces=namespaces)
    if choice.name == "kind":
        from harness.clusters.kind import KindBackend

        return KindBackend(run_id=choice.run_id, log_dir=log_dir, namespaces=namespaces)
    from harness.clusters.plane import LocalBackend, crd_documents
    from harness.clusters.pool import CURRENT, PooledBackend

    pool = CURRENT.get()
    if pool is not None:
        return PooledBackend(pool, log_dir=log_dir, crds=crd_documents(crds))
    from harness.clusters.binaries import ensure_binaries

    return LocalBackend(ensure_binaries(), log_dir=log_dir, crds=crds)
