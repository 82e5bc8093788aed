"""Clusters for the harness: real kube-apiservers on one shared etcd, owned as processes.

Nothing is re-exported here on purpose: ``python -m harness.clusters.binaries`` must be
runnable without importing the rest of the package first.
"""
