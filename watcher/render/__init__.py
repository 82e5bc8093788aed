"""Pure renderers: Watcher CRs → SKR webhook configuration, KCP VirtualServices, the SKR
install bundle, and the Envoy configuration that stands in for Istio's gateway.

Modules follow the data: ``watcher_cr`` (validated Watcher) → ``webhook_config`` (SKR
side) and ``skr_bundle`` (what KLM installs in every SKR) → ``virtualservice`` (KCP side)
→ ``envoy`` (VirtualServices → file-based xDS). No I/O here: callers write and apply.
"""

from watcher.render.envoy import (
    ClusterSettings,
    EnvoyConfig,
    FaultInjection,
    GatewayListener,
    TlsFiles,
    UpstreamTls,
    XdsLayout,
    render_bootstrap,
    render_envoy,
    update_sequence,
)
from watcher.render.errors import RenderError
from watcher.render.kcp_manifests import KcpManifestParams, Runtime, render_kcp_manifests
from watcher.render.skr_bundle import SkrBundleSettings, render_skr_bundle
from watcher.render.skr_manifests import SkrManifestParams, render_skr_manifests
from watcher.render.virtualservice import gateway_dict, render_virtual_service, select_gateways
from watcher.render.watcher_cr import (
    DEFAULT_GATEWAY_SELECTOR,
    Watcher,
    klm_watcher_dict,
    parse_watcher,
    parse_watchers,
    watcher_dict,
)
from watcher.render.webhook_config import (
    ServiceTarget,
    UrlTarget,
    WebhookTarget,
    render_webhook_configuration,
)

__all__ = [
    "DEFAULT_GATEWAY_SELECTOR",
    "ClusterSettings",
    "EnvoyConfig",
    "FaultInjection",
    "GatewayListener",
    "KcpManifestParams",
    "RenderError",
    "Runtime",
    "ServiceTarget",
    "SkrBundleSettings",
    "SkrManifestParams",
    "TlsFiles",
    "UpstreamTls",
    "UrlTarget",
    "Watcher",
    "WebhookTarget",
    "XdsLayout",
    "gateway_dict",
    "klm_watcher_dict",
    "parse_watcher",
    "parse_watchers",
    "render_bootstrap",
    "render_envoy",
    "render_kcp_manifests",
    "render_skr_bundle",
    "render_skr_manifests",
    "render_virtual_service",
    "render_webhook_configuration",
    "select_gateways",
    "update_sequence",
    "watcher_dict",
]
