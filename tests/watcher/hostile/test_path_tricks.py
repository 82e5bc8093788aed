"""Manager and component names with path tricks are refused everywhere a name becomes a path.

One table of names as they travel on the wire (percent-encoded where HTTP needs it);
every row must be refused by the webhook (``POST /validate/<manager>`` → 4xx JSON, never
an event), by the listener (``/v2/<component>/event`` → 4xx JSON, and as its configured
component → ``ConfigError``), by ``validate_manager_name``, and by the Watcher CR
validation (as ``spec.manager``, as the managed-by label, and as ``metadata.name``).
"""

from __future__ import annotations

import asyncio
import re
import urllib.parse
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from hostile_http import build_request, exchange

from watcher.domain import MANAGED_BY_LABEL
from watcher.errors import ConfigError, InvalidWatcher
from watcher.listener import Listener, ListenerConfig
from watcher.paths import validate_manager_name
from watcher.render.watcher_cr import parse_watcher, watcher_dict
from watcher.webhook.app import AdmissionConfig, AdmissionHandler, build_runner
from watcher.webhook.delivery import Delivery
from watcher.webhook.kcpclient import KcpResponse
from watcher.webhook.metrics import WebhookMetrics
from watcher.webhook.settings import DeliverySettings

pytestmark = pytest.mark.usefixtures("no_leaked_tasks")

# (what, the path segment on the wire)
TRICKS = [
    ("dot-dot", ".."),
    ("dot-dot-slash", "../etc"),
    ("slash", "a/b"),
    ("encoded slash", "%2F"),
    ("encoded slash inside", "a%2Fb"),
    ("encoded dot-dot", "%2e%2e"),
    ("encoded dot-dot-slash", "%2E%2E%2Fx"),
    ("encoded traversal after a good name", "lifecycle-manager%2F..%2F..%2Fx"),
    ("backslash", "a%5Cb"),
    ("NUL", "a%00b"),
    ("trailing newline", "lifecycle-manager%0A"),
    ("CRLF", "lifecycle-manager%0D%0Ax"),
    ("64 characters", "a" * 64),
    ("1000 characters", "a" * 1000),
    ("upper case", "Lifecycle-Manager"),
    ("empty", ""),
    ("leading dash", "-manager"),
    ("trailing dash", "manager-"),
    ("dot", "a.b"),
    ("underscore", "a_b"),
    ("space", "a%20b"),
    ("long s (upper-cases to S)", "%C5%BF"),
    ("dotless i", "k%C4%B1ma"),
    ("percent", "%25"),
]
IDS = [what for what, _ in TRICKS]
SEGMENTS = [segment for _, segment in TRICKS]


class _Kcp:
    def __init__(self) -> None:
        self.posts: list[str] = []

    async def post(self, path: str, body: bytes, *, time_limit: float) -> KcpResponse:
        self.posts.append(path)
        return KcpResponse(200, "")


@pytest.fixture
async def webhook() -> AsyncIterator[tuple[int, _Kcp]]:
    kcp, metrics = _Kcp(), WebhookMetrics()
    delivery = Delivery(kcp, settings=DeliverySettings(workers=1), metrics=metrics)
    delivery.start()
    handler = AdmissionHandler(
        config=AdmissionConfig(kcp_addr="127.0.0.1:1", kcp_contract="v2"),
        delivery=delivery,
        metrics=metrics,
    )
    runner = build_runner(handler, header_timeout=5.0)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield int(runner.addresses[0][1]), kcp
    finally:
        await runner.cleanup()
        await delivery.drain(within=1.0)


REVIEW = (
    b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u1",'
    b'"operation":"CREATE","name":"kyma-1","namespace":"kcp-system",'
    b'"object":{"metadata":{"name":"kyma-1","namespace":"kcp-system"}}}}'
)


async def test_the_table_control_row_is_accepted(webhook: tuple[int, _Kcp]) -> None:
    """Without this row the refusals below could come from a broken fixture."""
    port, kcp = webhook
    data = build_request("POST", "/validate/lifecycle-manager", [], REVIEW)
    answer = await exchange(port, data, half_close=False)
    assert answer.status == 200 and answer.json["response"]["allowed"] is True
    async with asyncio.timeout(5):
        while not kcp.posts:
            await asyncio.sleep(0.01)
    assert kcp.posts == ["/v2/lifecycle-manager/event"]


@pytest.mark.parametrize("segment", SEGMENTS, ids=IDS)
async def test_webhook_refuses_the_manager(webhook: tuple[int, _Kcp], segment: str) -> None:
    port, kcp = webhook
    data = build_request("POST", "/validate/" + segment, [], REVIEW)
    answer = await exchange(port, data, half_close=False)
    assert answer.status in (400, 404), answer
    assert answer.json["error"]
    if answer.status == 400:
        assert "manager" in answer.json["error"]
    await asyncio.sleep(0.05)  # a queued event would have been posted by now
    assert kcp.posts == []


@pytest.mark.parametrize("segment", SEGMENTS, ids=IDS)
async def test_listener_refuses_the_component_in_the_path(segment: str) -> None:
    async with Listener(ListenerConfig(component="lifecycle-manager")) as listener:
        data = build_request("POST", f"/v2/{segment}/event", [], b"{}")
        answer = await exchange(listener.port, data, half_close=False)
    assert 400 <= answer.status < 500, answer
    assert answer.json["error"] and answer.json["reason"]


def _watcher(name: str, **kw: Any) -> dict[str, Any]:
    return watcher_dict(
        name,
        resource=("operator.kyma-project.io", "v1beta2", "kymas"),
        service=("klm-events", "kcp-system", 8082),
        uid="u",
        **kw,
    )


@pytest.mark.parametrize("segment", SEGMENTS, ids=IDS)
def test_names_are_refused_as_configuration_and_in_watchers(segment: str) -> None:
    name = urllib.parse.unquote(segment)
    with pytest.raises(ValueError):
        validate_manager_name(name)
    with pytest.raises(ConfigError, match="component"):
        ListenerConfig(component=name)
    as_manager = _watcher("bad-watcher", manager=name)
    with pytest.raises(InvalidWatcher, match=r"Watcher kcp-system/bad-watcher .*manager"):
        parse_watcher(as_manager)
    as_label = _watcher("bad-watcher", manager="", labels={MANAGED_BY_LABEL: name})
    with pytest.raises(InvalidWatcher, match="bad-watcher"):
        parse_watcher(as_label)
    subdomain = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
    if re.fullmatch(subdomain, name) and len(name) <= 200:
        return  # a DNS subdomain, which metadata.name may be (it is no path segment)
    with pytest.raises(InvalidWatcher, match=r"metadata\.name"):
        parse_watcher(_watcher(name, manager="lifecycle-manager"))
