"""SAN pinning: the Kyma's skr-domain must be one of the certificate's SANs."""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from listener_testing import make_cert

from watcher.listener.certs import SubjectAltNames
from watcher.listener.errors import VerificationFailed
from watcher.listener.sanpin import domain_matches, san_pinning
from watcher.listener.verify import VerifyRequest
from watcher.model import Contract, GroupVersionKind, ObjectKey, WatchEvent

EVENT = WatchEvent(ObjectKey("kyma-system", "default"), GroupVersionKind("g", "v", "Kyma"))


class Kymas:
    """A lookup over a dict; records what it was asked."""

    def __init__(self, annotations: dict[str, dict[str, str]]) -> None:
        self.annotations = annotations
        self.calls: list[tuple[str, ObjectKey | None]] = []

    async def __call__(self, runtime_id: str, owner: ObjectKey | None) -> Mapping[str, str] | None:
        self.calls.append((runtime_id, owner))
        key = str(owner) if owner is not None else runtime_id
        return self.annotations.get(key)


def request(
    *,
    dns: list[str] | None = None,
    uris: list[str] | None = None,
    ips: list[str] | None = None,
    contract: Contract = "v2",
    event: WatchEvent = EVENT,
) -> VerifyRequest:
    cert = make_cert("runtime-a", dns=dns or [], uris=uris or [], ips=ips or [])
    return VerifyRequest(runtime_id="runtime-a", event=event, certificate=cert, contract=contract)


async def test_passes_when_a_dns_san_equals_the_domain() -> None:
    kymas = Kymas({"runtime-a": {"skr-domain": "skr-a.example.com"}})
    hook = san_pinning(kymas)
    await hook(request(dns=["skr-webhook.kyma-system.svc", "SKR-A.example.com"]))
    assert kymas.calls == [("runtime-a", None)]


@pytest.mark.parametrize(
    ("uris", "ips", "domain"),
    [
        (["spiffe://skr-a"], [], "spiffe://skr-a"),
        ([], ["10.1.2.3"], "10.1.2.3"),
        ([], ["2001:db8::1"], "2001:DB8:0::1"),
    ],
)
async def test_passes_on_uri_and_ip_sans(uris: list[str], ips: list[str], domain: str) -> None:
    await san_pinning(Kymas({"runtime-a": {"skr-domain": domain}}))(request(uris=uris, ips=ips))


@pytest.mark.parametrize(
    ("annotations", "sans", "category", "reason"),
    [
        ({}, ["skr-a.example.com"], "unknown-kyma", "no Kyma found in KCP for runtime id"),
        (
            {"runtime-a": {"other": "x"}},
            ["skr-a.example.com"],
            "missing-skr-domain",
            "has no 'skr-domain' annotation",
        ),
        (
            {"runtime-a": {"skr-domain": ""}},
            ["skr-a.example.com"],
            "missing-skr-domain",
            "has no 'skr-domain' annotation",
        ),
        (
            {"runtime-a": {"skr-domain": "skr-b.example.com"}},
            ["skr-a.example.com"],
            "san-mismatch",
            "do not include the Kyma's skr-domain 'skr-b.example.com'",
        ),
        (
            {"runtime-a": {"skr-domain": "skr-a.example.com"}},
            [f"n{i}.example.com" for i in range(100)] + ["skr-a.example.com"],
            "too-many-sans",
            "101 SANs, at most 100",
        ),
    ],
)
async def test_rejections_have_distinct_categories_and_reasons(
    annotations: dict[str, dict[str, str]], sans: list[str], category: str, reason: str
) -> None:
    with pytest.raises(VerificationFailed, match=reason) as caught:
        await san_pinning(Kymas(annotations))(request(dns=sans))
    assert caught.value.category == category


async def test_too_many_sans_is_refused_before_any_lookup() -> None:
    kymas = Kymas({})
    with pytest.raises(VerificationFailed):
        await san_pinning(kymas, max_sans=1)(request(dns=["a.example", "b.example"]))
    assert kymas.calls == []


async def test_exactly_the_limit_is_allowed() -> None:
    sans = [f"n{i}.example.com" for i in range(99)] + ["skr-a.example.com"]
    await san_pinning(Kymas({"runtime-a": {"skr-domain": "skr-a.example.com"}}))(request(dns=sans))


async def test_contract_v1_looks_up_the_owner() -> None:
    event = WatchEvent(EVENT.watched, EVENT.watched_gvk, owner=ObjectKey("kcp-system", "kyma-a"))
    kymas = Kymas({"kcp-system/kyma-a": {"skr-domain": "skr-a.example.com"}})
    await san_pinning(kymas)(request(dns=["skr-a.example.com"], contract="v1", event=event))
    assert kymas.calls == [("runtime-a", ObjectKey("kcp-system", "kyma-a"))]
    with pytest.raises(VerificationFailed, match="owner kcp-system/kyma-a"):
        await san_pinning(Kymas({}))(request(dns=["x"], contract="v1", event=event))


async def test_lookup_errors_propagate() -> None:
    async def broken(runtime_id: str, owner: ObjectKey | None) -> Mapping[str, str] | None:
        raise ConnectionError("KCP API server unreachable")

    with pytest.raises(ConnectionError):
        await san_pinning(broken)(request(dns=["x"]))


def test_domain_matching_rules() -> None:
    sans = SubjectAltNames(dns=("skr.example.com.",), uris=("https://x/Y",), ips=("10.0.0.1",))
    assert domain_matches("SKR.example.com", sans)
    assert domain_matches("https://x/Y", sans)
    assert not domain_matches("https://x/y", sans)
    assert domain_matches("10.0.0.1", sans)
    assert not domain_matches("10.0.0.2", sans)
    assert not domain_matches("example.com", sans)
