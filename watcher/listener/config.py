"""Listener configuration: one frozen object, validated when built."""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from typing import Literal

from watcher.errors import ConfigError
from watcher.listener.gateway_trust import TrustedGateways
from watcher.listener.verify import RejectionObserver, VerifyHook
from watcher.model import CONTRACTS, Contract
from watcher.paths import event_path, validate_manager_name

IdentityMode = Literal["xfcc", "direct-mtls"]
"""Where the runtime id comes from.

``xfcc``: behind the KCP gateway, which verified the client certificate and forwards it
in ``X-Forwarded-Client-Cert``. ``direct-mtls``: no gateway; the listener terminates
mTLS itself and reads the TLS peer certificate. XFCC headers are then ignored, because
any client could send one.

In ``xfcc`` mode, ``trusted_gateways`` plus an ``ssl_context`` that requires client
certificates (``watcher.listener.tls.gateway_mtls_context``) make the listener believe
XFCC only from a TLS peer on the gateway allow-list (see ``gateway_trust``). Without
them it believes XFCC from anyone who can connect: the explicit plain-HTTP opt-out for
local tests and benchmarks, logged as a warning when the listener starts.
"""

XfccTrust = Literal["gateway-mtls", "any-client"]


@dataclass(frozen=True, kw_only=True)
class ListenerConfig:
    component: str
    contract: Contract = "v2"
    host: str = "127.0.0.1"
    port: int = 0
    ssl_context: ssl.SSLContext | None = None
    identity: IdentityMode = "xfcc"
    trusted_gateways: TrustedGateways | None = None
    buffer_size: int = 64
    backpressure_timeout: float = 5.0
    retry_after_seconds: int = 1
    verify_hooks: tuple[VerifyHook, ...] = ()
    rejection_observers: tuple[RejectionObserver, ...] = ()
    """Told of every refused event whose runtime is known (:class:`Rejection`)."""
    max_body_bytes: int = 16384
    max_xfcc_bytes: int = 32768
    serve_metrics: bool = True
    shutdown_timeout: float = 5.0
    header_timeout: float = 15.0
    """A request head not complete this long after the connect or the previous answer
    closes the connection (slowloris); also the idle keep-alive timeout."""
    body_timeout: float = 10.0
    """A body not complete this long after its head is answered 408."""

    def __post_init__(self) -> None:
        try:
            validate_manager_name(self.component)
        except ValueError as exc:
            raise ConfigError(f"component: {exc}") from None
        if self.contract not in CONTRACTS:
            raise ConfigError(
                f"contract must be one of {', '.join(CONTRACTS)}, got {self.contract!r}"
            )
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"port must be in 0..65535, got {self.port}")
        if self.identity not in ("xfcc", "direct-mtls"):
            raise ConfigError(f"identity must be 'xfcc' or 'direct-mtls', got {self.identity!r}")
        if self.identity == "direct-mtls" and (
            self.ssl_context is None or self.ssl_context.verify_mode != ssl.CERT_REQUIRED
        ):
            raise ConfigError(
                "identity 'direct-mtls' needs an ssl_context that requires client "
                "certificates (verify_mode CERT_REQUIRED); see watcher.listener.tls"
            )
        self._check_gateway_trust()
        for name in ("buffer_size", "retry_after_seconds"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must be >= 0, got {getattr(self, name)}")
        for name in ("backpressure_timeout", "shutdown_timeout", "header_timeout", "body_timeout"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"{name} must be > 0, got {getattr(self, name)}")
        for name in ("max_body_bytes", "max_xfcc_bytes"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be > 0, got {getattr(self, name)}")

    def _check_gateway_trust(self) -> None:
        requires_certs = (
            self.ssl_context is not None and self.ssl_context.verify_mode == ssl.CERT_REQUIRED
        )
        if self.identity == "direct-mtls":
            if self.trusted_gateways is not None:
                raise ConfigError(
                    "trusted_gateways is for identity 'xfcc' (behind a gateway); "
                    "'direct-mtls' ignores XFCC headers"
                )
            return
        if self.trusted_gateways is not None and not requires_certs:
            raise ConfigError(
                "trusted_gateways needs an ssl_context that requires client certificates "
                "from the gateway CA; see watcher.listener.tls.gateway_mtls_context"
            )
        if requires_certs and self.trusted_gateways is None:
            raise ConfigError(
                "identity 'xfcc' with client certificates needs trusted_gateways: without "
                "an allow-list any certificate from the gateway CA could forge XFCC"
            )

    @property
    def xfcc_trust(self) -> XfccTrust | None:
        """Whose XFCC is believed: only the gateway's, anyone's, or nobody's (direct mTLS)."""
        if self.identity != "xfcc":
            return None
        return "any-client" if self.trusted_gateways is None else "gateway-mtls"

    @property
    def event_path(self) -> str:
        return event_path(self.contract, self.component)

    @property
    def scheme(self) -> str:
        return "http" if self.ssl_context is None else "https"
