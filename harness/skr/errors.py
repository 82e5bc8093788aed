"""Errors of the SKR installation (``harness.skr``); all are ``HarnessError``s."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from harness.errors import HarnessError
from harness.kube import KubeError


class SkrInstallError(HarnessError, RuntimeError):
    """Installing, rewiring or removing the watcher in an SKR failed; the message says where."""


class WebhookProcessError(SkrInstallError):
    """The ``watcher-webhook`` process of an SKR could not be started, stopped or scraped."""


@contextlib.contextmanager
def as_install_error(skr: str) -> Iterator[None]:
    """A :class:`~harness.kube.KubeError` inside is raised as an :class:`SkrInstallError`
    naming SKR ``skr``."""
    try:
        yield
    except KubeError as exc:
        raise SkrInstallError(f"SKR {skr}: {exc}") from None
