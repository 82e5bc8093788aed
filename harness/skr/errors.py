"""Errors of the SKR installation (``harness.skr``); all are ``HarnessError``s."""

from __future__ import annotations

from harness.errors import HarnessError


class SkrInstallError(HarnessError, RuntimeError):
    """Installing, rewiring or removing the watcher in an SKR failed; the message says where."""


class WebhookProcessError(SkrInstallError):
    """The ``watcher-webhook`` process of an SKR could not be started, stopped or scraped."""
