"""What can go wrong with the KCP gateway, one exception type per cause."""

from __future__ import annotations

from harness.errors import HarnessError


class GatewayError(HarnessError, RuntimeError):
    """The KCP gateway could not be started, configured or observed."""


class GatewayConfigError(GatewayError, ValueError):
    """The VirtualServices cannot be turned into Envoy configuration (nothing was written)."""


class GatewayUpdateRejected(GatewayError):
    """Envoy rejected a configuration file; the previous configuration keeps serving."""


class GatewayUpdateTimeout(GatewayError, TimeoutError):
    """Envoy did not report the new configuration version before the deadline."""
