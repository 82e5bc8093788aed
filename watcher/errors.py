"""The product's exception tree: callers catch ``WatcherError`` to handle any of ours."""

from __future__ import annotations


class WatcherError(Exception):
    """Base of every error the ``watcher`` package raises on purpose."""


class InvalidAdmissionReview(WatcherError, ValueError):
    """The input is not a usable ``admission.k8s.io/v1`` AdmissionReview.

    The message names the offending field so it can be shown to a user as is.
    """


class InvalidWatchEvent(WatcherError, ValueError):
    """A WatchEvent body could not be decoded."""


class InvalidWatcher(WatcherError, ValueError):
    """A Watcher CR cannot be rendered; the message lists every reason."""


class ConfigError(WatcherError, ValueError):
    """Process configuration (environment, flags, files) is unusable."""


class CertificateError(WatcherError, ValueError):
    """A certificate, key or CA bundle could not be loaded or parsed."""
