"""The listener's exceptions; each maps to one HTTP status so the handler stays a table.

All of them are ``WatcherError`` so callers can catch the whole product tree; the
``ValueError``/``TimeoutError`` mixins let generic callers treat them idiomatically.
"""

from __future__ import annotations

from watcher.errors import WatcherError


class ListenerError(WatcherError):
    """Base of every error ``watcher.listener`` raises on purpose."""


class ListenerStartError(ListenerError, OSError):
    """The listener could not bind its address."""


class ClientCertificateError(ListenerError, ValueError):
    """The caller's client certificate is missing or unusable (HTTP 401)."""


class XfccError(ClientCertificateError):
    """An ``X-Forwarded-Client-Cert`` header is malformed or carries no usable ``Cert``."""


class UntrustedProxy(ListenerError):
    """The TLS peer is not on the gateway allow-list, so its XFCC is not believed (HTTP 403)."""


class CommonNameError(ListenerError, ValueError):
    """The certificate's Subject CN cannot serve as a runtime id (HTTP 400).

    Raised for a missing or empty CN, and for several CNs (the id would be ambiguous).
    """


class VerificationFailed(ListenerError):
    """A verify hook refuses an event (HTTP 403).

    ``reason`` is shown to the caller; ``category`` is a short, bounded token used as a
    Prometheus label value, so hooks must not put runtime ids or domains into it.
    """

    def __init__(self, reason: str, *, category: str = "rejected") -> None:
        super().__init__(reason)
        self.reason = reason
        self.category = category


class StreamClosed(ListenerError):
    """The event stream no longer accepts events: the listener is shutting down."""


class BackpressureTimeout(ListenerError, TimeoutError):
    """The consumer did not make room for an event in time (HTTP 503)."""
