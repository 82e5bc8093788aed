"""Gateway → listener mTLS in the rendered clusters: client certificate, TLS 1.3, and the
listener's serving certificate pinned to the destination each cluster serves."""

from __future__ import annotations

from typing import Any

from watcher.render.envoy import (
    ClusterSettings,
    GatewayListener,
    TlsFiles,
    UpstreamTls,
    XdsLayout,
    render_envoy,
)
from watcher.render.virtualservice import gateway_dict, render_virtual_service
from watcher.render.watcher_cr import klm_watcher_dict, parse_watcher, watcher_dict

GATEWAY = GatewayListener(port=8443, tls=TlsFiles("/pki/gw.crt", "/pki/gw.key", "/pki/ca.crt"))
UPSTREAM = UpstreamTls("/mesh/gw-client.crt", "/mesh/gw-client.key", "/mesh/ca.crt")


def _watcher_vs(name: str, manager: str, service: tuple[str, str, int]) -> dict[str, Any]:
    obj = watcher_dict(
        name,
        manager=manager,
        resource=("operator.kyma-project.io", "v1beta2", "kymas"),
        service=service,
        uid="u-" + name,
    )
    return render_virtual_service(parse_watcher(obj), [gateway_dict()])


def _contexts(upstream: UpstreamTls) -> dict[str, dict[str, Any]]:
    klm = render_virtual_service(parse_watcher(klm_watcher_dict(uid="u")), [gateway_dict()])
    other = _watcher_vs("other", "other-manager", ("other-events", "team-x", 9090))
    config = render_envoy(
        [klm, other],
        resolver={
            "klm-controller-manager-events.kcp-system.svc.cluster.local:8082": ("127.0.0.1", 1),
            "other-events.team-x.svc.cluster.local:9090": ("127.0.0.1", 2),
        },
        gateway=GATEWAY,
        layout=XdsLayout("/run/gw"),
        clusters=ClusterSettings(upstream_tls=upstream),
    )
    return {c["name"]: c["transport_socket"]["typed_config"] for c in config.clusters}


def test_each_cluster_pins_its_own_destination_san_with_tls13_and_the_gateway_cert() -> None:
    contexts = _contexts(UPSTREAM)
    assert sorted(contexts) == [
        "klm-controller-manager-events_kcp-system_8082",
        "other-events_team-x_9090",
    ]
    for name, host in (
        (
            "klm-controller-manager-events_kcp-system_8082",
            "klm-controller-manager-events.kcp-system.svc.cluster.local",
        ),
        ("other-events_team-x_9090", "other-events.team-x.svc.cluster.local"),
    ):
        context = contexts[name]
        assert context["@type"].endswith("UpstreamTlsContext")
        assert context["sni"] == host
        common = context["common_tls_context"]
        assert common["tls_params"] == {
            "tls_minimum_protocol_version": "TLSv1_3",
            "tls_maximum_protocol_version": "TLSv1_3",
        }
        assert common["tls_certificates"] == [
            {
                "certificate_chain": {"filename": "/mesh/gw-client.crt"},
                "private_key": {"filename": "/mesh/gw-client.key"},
            }
        ]
        assert common["validation_context"] == {
            "trusted_ca": {"filename": "/mesh/ca.crt"},
            "match_typed_subject_alt_names": [{"san_type": "DNS", "matcher": {"exact": host}}],
        }


def test_a_configured_server_name_overrides_the_destination() -> None:
    upstream = UpstreamTls(UPSTREAM.cert_chain, UPSTREAM.private_key, UPSTREAM.ca, "listeners.kcp")
    for context in _contexts(upstream).values():
        assert context["sni"] == "listeners.kcp"
        matchers = context["common_tls_context"]["validation_context"][
            "match_typed_subject_alt_names"
        ]
        assert matchers == [{"san_type": "DNS", "matcher": {"exact": "listeners.kcp"}}]
