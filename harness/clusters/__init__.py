"""Clusters for the harness: real kube-apiservers on one shared etcd, owned as processes.

Modules, in the order a start-up uses them:

* ``binaries`` — find etcd, build and cache kube-apiserver (also a command line), with
  ``installed_programs`` (Go, etcd), ``go_build`` (a Go program built once into the cache)
  and ``go_tools`` (upstream's listener, the load generator)
* ``process`` — one object owns one external process (start, readiness, stop, record),
  and a safety net kills the process groups whose owner never got to stop them
* ``etcd`` / ``apiserver`` — the two servers, each with its own temp dir and certificates
* ``plane`` — the ``ClusterBackend`` protocol and the ``local`` backend composing them

Nothing is re-exported here on purpose: ``python -m harness.clusters.binaries`` must be
runnable without importing the rest of the package first.
"""
