"""Invalid Watcher CRs never produce a broken webhook or route configuration.

Hypothesis starts from valid Watcher dicts and breaks them: fields removed, values of the
wrong JSON type, path-trick names, bad label selectors, bad field values. For each
result, ``parse_watcher`` either raises ``InvalidWatcher`` naming the Watcher, or every
renderer's output is structurally valid: webhook names are DNS subdomains with at least
three segments, clientConfig paths are ``/validate/<DNS label>``, rules are well-formed;
the VirtualService routes ``/v2/<DNS label>/event``; the Envoy configuration renders and
every route prefix is such a path. One bad Watcher among good ones leaves the good
ones' configuration intact (the harness filters with ``valid_watcher``, as its Watcher
controller and SKR installer do; the controller sets the bad one's status to Error,
tests/harness/kcp/test_watcher_controller_e2e.py).
"""

from __future__ import annotations

import copy
import re
from typing import Any

import trustme
from hostile_inputs import TRICKY_NAMES, WRONG_TYPES
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from harness.kcp.lifecycle_manager.watcher_controller import valid_watcher
from watcher.domain import MANAGED_BY_LABEL
from watcher.errors import InvalidWatcher
from watcher.render.envoy import GatewayListener, TlsFiles, XdsLayout, render_envoy
from watcher.render.virtualservice import gateway_dict, render_virtual_service
from watcher.render.watcher_cr import Watcher, parse_watcher, watcher_dict
from watcher.render.webhook_config import UrlTarget, render_webhook_configuration

CA_PEM = trustme.CA().cert_pem.bytes()
GATEWAYS = [gateway_dict()]
LAYOUT = XdsLayout("/run/gw")
GATEWAY = GatewayListener(port=8443, tls=TlsFiles("/pki/gw.crt", "/pki/gw.key", "/pki/ca.crt"))

DNS_LABEL = r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?"
DNS_SUBDOMAIN = re.compile(rf"{DNS_LABEL}(\.{DNS_LABEL})*")
VALIDATE_PATH = re.compile(rf"/validate/{DNS_LABEL}")
EVENT_PATH = re.compile(rf"/v2/{DNS_LABEL}/event")

names = st.from_regex(r"\A[a-z]([a-z0-9-]{0,8}[a-z0-9])?\Z")


@st.composite
def good_watchers(draw: st.DrawFn) -> dict[str, Any]:
    manager = draw(names)
    via_label = draw(st.booleans())
    return watcher_dict(
        draw(names),
        namespace=draw(names),
        manager="" if via_label else manager,
        labels={MANAGED_BY_LABEL: manager} if via_label else None,
        resource=(
            draw(st.sampled_from(["", "apps", "operator.kyma-project.io", "*"])),
            draw(st.sampled_from(["v1", "v1beta2", "*"])),
            draw(names),
        ),
        field=draw(st.sampled_from(["spec", "status"])),
        service=(draw(names), draw(names), draw(st.integers(1, 65535))),
        labels_to_watch=draw(st.dictionaries(st.sampled_from(["app", "x.io/team"]), names)),
        uid=draw(st.uuids()).hex,
    )


# Where a Watcher can be broken; each path is a chain of keys from the root.
PATHS = [
    ("apiVersion",),
    ("kind",),
    ("metadata",),
    ("metadata", "name"),
    ("metadata", "namespace"),
    ("metadata", "labels"),
    ("metadata", "labels", MANAGED_BY_LABEL),
    ("metadata", "uid"),
    ("spec",),
    ("spec", "manager"),
    ("spec", "field"),
    ("spec", "resourceToWatch"),
    ("spec", "resourceToWatch", "group"),
    ("spec", "resourceToWatch", "version"),
    ("spec", "resourceToWatch", "resource"),
    ("spec", "labelsToWatch"),
    ("spec", "serviceInfo"),
    ("spec", "serviceInfo", "name"),
    ("spec", "serviceInfo", "namespace"),
    ("spec", "serviceInfo", "port"),
    ("spec", "gateway"),
    ("spec", "gateway", "selector"),
    ("spec", "gateway", "selector", "matchLabels"),
    ("spec", "gateway", "selector", "matchExpressions"),
]
BAD_VALUES = st.one_of(
    st.sampled_from(WRONG_TYPES),
    st.sampled_from(TRICKY_NAMES),
    st.sampled_from(
        [
            "both",
            "kymas/status",
            "V1",
            "Kymas",
            0,
            70000,
            "8082",
            {"a/b/c": "x"},
            {"app": "not a value!"},
            {"-bad": "x"},
            [{"key": "app", "operator": "Foo"}],
            [{"key": "app", "operator": "In"}],
            [{"key": "app", "operator": "Exists", "values": ["x"]}],
            [{"key": "..", "operator": "Exists"}],
            {"matchLabels": {"nope": "nope"}},
            "operator.kyma-project.io/v1",
            "Watcher\n",
        ]
    ),
)
mutations = st.tuples(st.sampled_from(PATHS), st.booleans(), BAD_VALUES)


def _mutate(obj: dict[str, Any], path: tuple[str, ...], delete: bool, value: Any) -> None:
    parent: Any = obj
    for key in path[:-1]:
        if not isinstance(parent, dict):
            return
        parent = parent.setdefault(key, {})
    if not isinstance(parent, dict):
        return
    if delete:
        parent.pop(path[-1], None)
    else:
        parent[path[-1]] = copy.deepcopy(value)


@st.composite
def broken_watchers(draw: st.DrawFn) -> dict[str, Any]:
    obj = draw(good_watchers())
    for path, delete, value in draw(st.lists(mutations, min_size=1, max_size=3)):
        _mutate(obj, path, delete, value)
    return obj


def check_webhook_configuration(config: dict[str, Any], watchers: list[Watcher]) -> None:
    assert config["kind"] == "ValidatingWebhookConfiguration"
    webhooks = config["webhooks"]
    assert [w["name"] for w in webhooks] == [w.webhook_name for w in watchers]
    for webhook in webhooks:
        name = webhook["name"]
        assert len(name) <= 253 and DNS_SUBDOMAIN.fullmatch(name), name
        assert len(name.split(".")) >= 3, name
        url = webhook["clientConfig"]["url"]
        path = url.split(":8443", 1)[1]
        assert VALIDATE_PATH.fullmatch(path), url
        assert webhook["failurePolicy"] == "Ignore"
        (rule,) = webhook["rules"]
        for key in ("apiGroups", "apiVersions", "resources", "operations"):
            assert rule[key] and all(isinstance(v, str) for v in rule[key]), rule
        (resource,) = rule["resources"]
        assert re.fullmatch(rf"(\*|{DNS_LABEL})(/status)?", resource), resource
        for key, value in webhook["objectSelector"].get("matchLabels", {}).items():
            assert isinstance(key, str) and isinstance(value, str)


def check_routes(watcher: Watcher) -> None:
    try:
        vs = render_virtual_service(watcher, GATEWAYS)
    except InvalidWatcher as exc:  # e.g. its gateway selector matches no Gateway
        assert str(exc).startswith(f"Watcher {watcher.route_name}"), exc
        return
    (http,) = vs["spec"]["http"]
    assert EVENT_PATH.fullmatch(http["match"][0]["uri"]["prefix"]), http
    destination = http["route"][0]["destination"]
    assert 1 <= destination["port"]["number"] <= 65535
    host_port = f"{destination['host']}:{destination['port']['number']}"
    for resolver in ({}, {host_port: ("127.0.0.1", 9000)}):  # unresolved → 503, resolved
        config = render_envoy([vs], resolver=resolver, gateway=GATEWAY, layout=LAYOUT)
        routes = [r for h in config.route_configuration["virtual_hosts"] for r in h["routes"]]
        for route in routes:
            prefix = route["match"].get("prefix") or route["match"].get("path")
            if route["name"] == "catch-all":  # everything else: 404, never forwarded
                assert prefix == "/" and route["direct_response"]["status"] == 404, route
            else:
                assert EVENT_PATH.fullmatch(prefix), route
        assert any(r["name"] == watcher.route_name for r in routes), routes


def _identity(obj: Any) -> str | None:
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    name = meta.get("name") if isinstance(meta, dict) else None
    return name if isinstance(name, str) and name else None


@settings(max_examples=1000, deadline=None, derandomize=True, database=None)
@given(broken_watchers())
def test_a_broken_watcher_is_refused_by_name_or_renders_valid_config(obj: dict[str, Any]) -> None:
    try:
        watcher = parse_watcher(obj)
    except InvalidWatcher as exc:
        event("refused")
        message = str(exc)
        assert message.startswith("Watcher"), message
        name = _identity(obj)
        if name is not None and isinstance(obj["metadata"], dict):
            assert f"/{name} cannot be rendered" in message, message
        return
    event("rendered")
    config = render_webhook_configuration(
        [watcher], ca_bundle_pem=CA_PEM, target=UrlTarget("127.0.0.1", 8443)
    )
    check_webhook_configuration(config, [watcher])
    check_routes(watcher)


@settings(
    max_examples=300,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    st.lists(good_watchers(), min_size=1, max_size=3, unique_by=lambda w: _identity(w)),
    st.lists(broken_watchers(), min_size=1, max_size=3),
)
def test_bad_watchers_among_good_ones_leave_the_good_configuration_intact(
    good: list[dict[str, Any]], bad: list[dict[str, Any]]
) -> None:
    # what the harness's controller hands to the SKR installer: the valid ones only
    good_names = {(w["metadata"]["namespace"], w["metadata"]["name"]) for w in good}
    bad = [b for b in bad if (_raw_key(b) not in good_names)]  # the API server keys by name
    listed = [*bad, *good]
    valid = [w for w in (valid_watcher(obj) for obj in listed) if w is not None]
    by_key = {(w.namespace, w.name): w for w in valid}
    assert good_names <= set(by_key)
    config = render_webhook_configuration(
        sorted(by_key.values(), key=lambda w: w.route_name),
        ca_bundle_pem=CA_PEM,
        target=UrlTarget("127.0.0.1", 8443),
    )
    check_webhook_configuration(config, sorted(by_key.values(), key=lambda w: w.route_name))
    rendered = {w["name"] for w in config["webhooks"]}
    for namespace, name in good_names:
        assert f"{namespace}.{name}.operator.kyma-project.io" in rendered
    for watcher in valid:
        check_routes(watcher)


def _raw_key(obj: dict[str, Any]) -> tuple[Any, Any]:
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return (None, None)
    try:
        hash((meta.get("namespace"), meta.get("name")))
    except TypeError:
        return (None, None)
    return (meta.get("namespace"), meta.get("name"))
