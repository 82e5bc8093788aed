"""VirtualServices → Envoy file-based xDS resources (v3 field names, stable output)."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from render_testing import unique_watcher_dicts

from watcher.render.envoy import (
    CLUSTER_TYPE,
    FAULT_FILTER,
    LISTENER_TYPE,
    ROUTE_CONFIGURATION_TYPE,
    ClusterSettings,
    EnvoyConfig,
    FaultInjection,
    GatewayListener,
    TlsFiles,
    UpstreamTls,
    XdsLayout,
    discovery_response,
    render_bootstrap,
    render_envoy,
    update_sequence,
)
from watcher.render.errors import RenderError
from watcher.render.virtualservice import gateway_dict, render_virtual_service
from watcher.render.watcher_cr import klm_watcher_dict, parse_watcher, watcher_dict

LAYOUT = XdsLayout("/run/gw")
GATEWAY = GatewayListener(port=8443, tls=TlsFiles("/pki/gw.crt", "/pki/gw.key", "/pki/ca.crt"))
KLM_HOST = "klm-controller-manager-events.kcp-system.svc.cluster.local:8082"
KLM_VS = render_virtual_service(parse_watcher(klm_watcher_dict(uid="u")), [gateway_dict()])


def _vs(name: str, manager: str, service: tuple[str, str, int]) -> dict[str, Any]:
    obj = watcher_dict(
        name, manager=manager, resource=("", "v1", "configmaps"), service=service, uid="u-" + name
    )
    return render_virtual_service(parse_watcher(obj), [gateway_dict()])


def _render(
    vss: list[dict[str, Any]], resolver: dict[str, tuple[str, int]], **kw: Any
) -> EnvoyConfig:
    return render_envoy(vss, resolver=resolver, gateway=GATEWAY, layout=LAYOUT, **kw)


def test_klm_route_configuration_exactly() -> None:
    config = _render([KLM_VS], {KLM_HOST: ("127.0.0.1", 9000)})
    assert config.route_configuration == {
        "@type": ROUTE_CONFIGURATION_TYPE,
        "name": "kcp_watcher",
        "virtual_hosts": [
            {
                "name": "kcp_watcher",
                "domains": ["*"],
                "routes": [
                    {
                        "name": "kcp-system/klm-watcher",
                        "match": {"prefix": "/v2/lifecycle-manager/event"},
                        "route": {"cluster": "klm-controller-manager-events_kcp-system_8082"},
                    },
                    {
                        "name": "catch-all",
                        "match": {"prefix": "/"},
                        "direct_response": {"status": 404},
                    },
                ],
            }
        ],
    }
    (cluster,) = config.clusters
    assert cluster["@type"] == CLUSTER_TYPE
    assert cluster["type"] == "STATIC"
    assert cluster["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"] == {
        "address": {"socket_address": {"address": "127.0.0.1", "port_value": 9000}}
    }
    assert "transport_socket" not in cluster
    assert config.unresolved == ()


def test_listener_is_istio_like_mtls() -> None:
    listener = _render([KLM_VS], {KLM_HOST: ("127.0.0.1", 9000)}).listener
    assert listener["@type"] == LISTENER_TYPE
    assert listener["address"] == {"socket_address": {"address": "127.0.0.1", "port_value": 8443}}
    (chain,) = listener["filter_chains"]
    tls = chain["transport_socket"]["typed_config"]
    assert tls["require_client_certificate"] is True
    common = tls["common_tls_context"]
    assert common["tls_params"] == {
        "tls_minimum_protocol_version": "TLSv1_3",
        "tls_maximum_protocol_version": "TLSv1_3",
    }
    assert common["validation_context"] == {"trusted_ca": {"filename": "/pki/ca.crt"}}
    assert common["tls_certificates"] == [
        {
            "certificate_chain": {"filename": "/pki/gw.crt"},
            "private_key": {"filename": "/pki/gw.key"},
        }
    ]
    hcm = chain["filters"][0]["typed_config"]
    assert hcm["forward_client_cert_details"] == "SANITIZE_SET"
    assert hcm["set_current_client_cert_details"] == {
        "subject": True,
        "cert": True,
        "dns": True,
        "uri": True,
    }
    assert hcm["rds"] == {
        "route_config_name": "kcp_watcher",
        "config_source": {
            "path_config_source": {
                "path": "/run/gw/rds.yaml",
                "watched_directory": {"path": "/run/gw"},
            },
            "resource_api_version": "V3",
        },
    }
    names = [f["name"] for f in hcm["http_filters"]]
    assert names == [FAULT_FILTER, "envoy.filters.http.router"]
    # disabled by default: an HTTPFault without abort or delay
    assert set(hcm["http_filters"][0]["typed_config"]) == {"@type"}


def test_bootstrap() -> None:
    assert render_bootstrap(LAYOUT, admin_port=9901) == {
        "node": {"id": "kcp-gateway", "cluster": "kcp-gateway"},
        "admin": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": 9901}}},
        "dynamic_resources": {
            "lds_config": {
                "path_config_source": {
                    "path": "/run/gw/lds.yaml",
                    "watched_directory": {"path": "/run/gw"},
                },
                "resource_api_version": "V3",
            },
            "cds_config": {
                "path_config_source": {
                    "path": "/run/gw/cds.yaml",
                    "watched_directory": {"path": "/run/gw"},
                },
                "resource_api_version": "V3",
            },
        },
    }


def test_fault_injection_on_listener_and_per_route() -> None:
    fault = FaultInjection(abort_percent=12.5, abort_status=500, delay_percent=100, delay_ms=1250)
    assert fault.http_fault() == {
        "@type": "type.googleapis.com/envoy.extensions.filters.http.fault.v3.HTTPFault",
        "abort": {
            "http_status": 500,
            "percentage": {"numerator": 125000, "denominator": "MILLION"},
        },
        "delay": {
            "fixed_delay": "1.250s",
            "percentage": {"numerator": 1000000, "denominator": "MILLION"},
        },
    }
    gateway = GatewayListener(port=1, tls=GATEWAY.tls, fault=fault)
    config = render_envoy([KLM_VS], resolver={}, gateway=gateway, layout=LAYOUT, route_fault=fault)
    hcm = config.listener["filter_chains"][0]["filters"][0]["typed_config"]
    assert hcm["http_filters"][0]["typed_config"] == fault.http_fault()
    vhost = config.route_configuration["virtual_hosts"][0]
    assert vhost["typed_per_filter_config"] == {FAULT_FILTER: fault.http_fault()}
    with pytest.raises(ValueError):
        FaultInjection(abort_percent=101)
    with pytest.raises(ValueError):
        FaultInjection(abort_status=600)


def test_upstream_tls_and_access_log() -> None:
    upstream = UpstreamTls("/c.pem", "/k.pem", "/ca.pem", server_name="127.0.0.1")
    gateway = GatewayListener(port=1, tls=GATEWAY.tls, access_log_path="/tmp/access.log")
    config = render_envoy(
        [KLM_VS],
        resolver={KLM_HOST: ("127.0.0.1", 1)},
        gateway=gateway,
        layout=LAYOUT,
        clusters=ClusterSettings(upstream_tls=upstream),
    )
    socket = config.clusters[0]["transport_socket"]
    assert socket["name"] == "envoy.transport_sockets.tls"
    context = socket["typed_config"]
    assert context["sni"] == "127.0.0.1"
    assert context["common_tls_context"]["validation_context"] == {
        "trusted_ca": {"filename": "/ca.pem"},
        "match_typed_subject_alt_names": [
            {"san_type": "IP_ADDRESS", "matcher": {"exact": "127.0.0.1"}}
        ],
    }
    hcm = config.listener["filter_chains"][0]["filters"][0]["typed_config"]
    assert hcm["access_log"][0]["typed_config"]["path"] == "/tmp/access.log"


def test_a_plaintext_destination_gets_no_upstream_tls() -> None:
    """A listener outside the mesh (upstream's, behind its sidecar) is reached over HTTP."""
    other = _vs("other", "other-manager", ("other-svc", "kcp-system", 9090))
    other_host = "other-svc.kcp-system.svc.cluster.local:9090"
    config = render_envoy(
        [KLM_VS, other],
        resolver={KLM_HOST: ("127.0.0.1", 1), other_host: ("127.0.0.1", 2)},
        gateway=GATEWAY,
        layout=LAYOUT,
        clusters=ClusterSettings(
            upstream_tls=UpstreamTls("/c.pem", "/k.pem", "/ca.pem"),
            plaintext=frozenset({other_host}),
        ),
    )
    sockets = {c["name"]: "transport_socket" in c for c in config.clusters}
    assert sockets == {
        "klm-controller-manager-events_kcp-system_8082": True,
        "other-svc_kcp-system_9090": False,
    }


def test_unknown_destination_is_reported_not_dropped() -> None:
    other = _vs("other", "other-manager", ("other-svc", "kcp-system", 9090))
    config = _render([KLM_VS, other], {KLM_HOST: ("127.0.0.1", 9000)})
    assert config.unresolved == ("other-svc.kcp-system.svc.cluster.local:9090",)
    routes = {r["name"]: r for r in config.route_configuration["virtual_hosts"][0]["routes"]}
    assert routes["kcp-system/other"]["direct_response"]["status"] == 503
    assert [c["name"] for c in config.clusters] == ["klm-controller-manager-events_kcp-system_8082"]
    with pytest.raises(RenderError, match=r"other-svc\.kcp-system"):
        _render([KLM_VS, other], {KLM_HOST: ("127.0.0.1", 9000)}, strict=True)


def test_unsupported_virtual_service_shapes_are_refused() -> None:
    broken = json.loads(json.dumps(KLM_VS))
    broken["spec"]["http"][0]["match"] = [{"uri": {"regex": ".*"}}]
    broken["spec"]["http"][0]["route"].append(broken["spec"]["http"][0]["route"][0])
    with pytest.raises(RenderError) as info:
        _render([broken], {})
    assert "exactly one route destination" in str(info.value)
    broken["spec"]["http"][0]["route"].pop()
    with pytest.raises(RenderError, match=r"only uri\.prefix or uri\.exact"):
        _render([broken], {})


def test_same_manager_twice_is_reported_as_shadowed() -> None:
    a = _vs("a", "m", ("svc-a", "ns", 1))
    b = _vs("b", "m", ("svc-b", "ns", 1))
    config = _render([b, a], {})
    assert config.shadowed == ("kcp-system/b kcp-system/b (prefix /v2/m/event)",)


def test_files_are_yaml_serialisable_with_content_versions() -> None:
    config = _render([KLM_VS], {KLM_HOST: ("127.0.0.1", 9000)})
    files = config.files()
    assert list(files) == ["cds.yaml", "rds.yaml", "lds.yaml"]
    for content in files.values():
        assert yaml.safe_load(yaml.safe_dump(content)) == content
        assert len(content["version_info"]) == 16
    assert discovery_response([{"a": 1}]) == discovery_response([{"a": 1}])


def test_update_sequence_adds_clusters_first_and_removes_them_last() -> None:
    old = _render([KLM_VS], {KLM_HOST: ("127.0.0.1", 9000)})
    other = _vs("other", "other-manager", ("other-svc", "kcp-system", 9090))
    resolver = {
        KLM_HOST: ("127.0.0.1", 9000),
        "other-svc.kcp-system.svc.cluster.local:9090": ("127.0.0.1", 9001),
    }
    new = _render([other], resolver)
    steps = update_sequence(old, new)
    assert [name for name, _ in steps] == ["cds.yaml", "rds.yaml", "cds.yaml"]
    union = {c["name"] for c in steps[0][1]["resources"]}
    assert union == {"klm-controller-manager-events_kcp-system_8082", "other-svc_kcp-system_9090"}
    assert steps[-1][1] == new.cds()
    assert update_sequence(new, new) == []
    assert [n for n, _ in update_sequence(None, new)] == ["cds.yaml", "rds.yaml", "lds.yaml"]


def _resolver_for(objs: list[dict[str, Any]]) -> dict[str, tuple[str, int]]:
    out = {}
    for i, obj in enumerate(objs):
        info = obj["spec"]["serviceInfo"]
        out[f"{info['name']}.{info['namespace']}.svc.cluster.local:{info['port']}"] = (
            "127.0.0.1",
            10000 + i,
        )
    return out


@given(unique_watcher_dicts(), st.randoms(use_true_random=False))
def test_routes_are_stable_sorted_and_every_cluster_exists(
    objs: list[dict[str, Any]], rnd: Any
) -> None:
    vss = [render_virtual_service(parse_watcher(o), [gateway_dict()]) for o in objs]
    resolver = _resolver_for(objs)
    config = _render(vss, resolver)
    shuffled = list(vss)
    rnd.shuffle(shuffled)
    assert _render(shuffled, resolver) == config
    routes = config.route_configuration["virtual_hosts"][0]["routes"]
    assert routes[-1] == {
        "name": "catch-all",
        "match": {"prefix": "/"},
        "direct_response": {"status": 404},
    }
    assert len(routes) == len(vss) + 1
    clusters = {c["name"] for c in config.clusters}
    for route in routes[:-1]:
        assert route["route"]["cluster"] in clusters
    lengths = [len(r["match"]["prefix"]) for r in routes[:-1]]
    assert lengths == sorted(lengths, reverse=True)
    prefixes = {r["match"]["prefix"] for r in routes[:-1]}
    assert prefixes == {f"/v2/{parse_watcher(o).manager}/event" for o in objs}
