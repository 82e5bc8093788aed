"""KCP-side listener: receives SKR watch events, identifies the runtime, hands events on.

Data flow: HTTP request (``handler``) → (behind the gateway) TLS peer on the gateway
allow-list (``gateway_trust``) → client certificate from XFCC (``xfcc``) or the
TLS peer → runtime id = Subject CN (``certs``) → verify hooks (``verify``, ``sanpin``)
→ bounded event stream with backpressure (``stream``) → ``async for`` in the operator.
``Listener`` (``server``) owns the server, stream and metrics; ``cli`` runs one.
"""

from watcher.domain import SKR_DOMAIN_ANNOTATION
from watcher.listener.certs import SubjectAltNames, runtime_id, subject_alt_names
from watcher.listener.config import IdentityMode, ListenerConfig
from watcher.listener.errors import (
    BackpressureTimeout,
    ClientCertificateError,
    CommonNameError,
    ListenerError,
    ListenerStartError,
    StreamClosed,
    UntrustedProxy,
    VerificationFailed,
    XfccError,
)
from watcher.listener.gateway_trust import TrustedGateways
from watcher.listener.metrics import ListenerMetrics
from watcher.listener.sanpin import KymaLookup, san_pinning
from watcher.listener.server import Listener
from watcher.listener.stream import EventStream, ListenerEvent
from watcher.listener.tls import direct_mtls_context, gateway_mtls_context, server_context
from watcher.listener.verify import Rejection, RejectionObserver, VerifyHook, VerifyRequest
from watcher.listener.xfcc import (
    XFCC_HEADER,
    certificate_from_xfcc,
    format_xfcc,
    parse_xfcc,
    query_unescape,
)

__all__ = [
    "SKR_DOMAIN_ANNOTATION",
    "XFCC_HEADER",
    "BackpressureTimeout",
    "ClientCertificateError",
    "CommonNameError",
    "EventStream",
    "IdentityMode",
    "KymaLookup",
    "Listener",
    "ListenerConfig",
    "ListenerError",
    "ListenerEvent",
    "ListenerMetrics",
    "ListenerStartError",
    "Rejection",
    "RejectionObserver",
    "StreamClosed",
    "SubjectAltNames",
    "TrustedGateways",
    "UntrustedProxy",
    "VerificationFailed",
    "VerifyHook",
    "VerifyRequest",
    "XfccError",
    "certificate_from_xfcc",
    "direct_mtls_context",
    "format_xfcc",
    "gateway_mtls_context",
    "parse_xfcc",
    "query_unescape",
    "runtime_id",
    "san_pinning",
    "server_context",
    "subject_alt_names",
]
