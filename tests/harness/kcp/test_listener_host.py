"""ListenerHost: a listener stopped and started on the same port keeps one event flow."""

from __future__ import annotations

import json

import aiohttp
import pytest

from harness.kcp.lifecycle_manager.events import ListenerHost, ListenerHostError
from watcher import pki
from watcher.listener import XFCC_HEADER, ListenerConfig, ListenerEvent, format_xfcc

BODY = json.dumps(
    {
        "watched": {"Namespace": "kyma-system", "Name": "default"},
        "watchedGvk": {"group": "operator.kyma-project.io", "version": "v1beta2", "kind": "Kyma"},
    }
)


@pytest.fixture(scope="module")
def xfcc() -> str:
    ca = pki.create_ca()
    return format_xfcc(pki.issue_runtime_certificate(ca, "runtime-a", "a.example").certificate)


async def post(session: aiohttp.ClientSession, url: str, header: str) -> int:
    async with session.post(url, data=BODY, headers={XFCC_HEADER: header}) as resp:
        return resp.status


async def test_restart_keeps_port_events_and_counters(xfcc: str) -> None:
    got: list[ListenerEvent] = []

    async def take(event: ListenerEvent) -> None:
        got.append(event)

    async with (
        ListenerHost(ListenerConfig(component="lifecycle-manager"), take) as host,
        aiohttp.ClientSession() as session,
    ):
        port, url = host.port, host.listener.event_url
        assert await post(session, url, xfcc) == 200
        await host.stop()
        assert not host.running
        with pytest.raises(aiohttp.ClientConnectionError):
            await post(session, url, xfcc)
        with pytest.raises(ListenerHostError):
            _ = host.listener
        await host.start()
        assert host.port == port
        assert await post(session, url, xfcc) == 200
        with pytest.raises(ListenerHostError, match="already running"):
            await host.start()
    assert [e.runtime_id for e in got] == ["runtime-a", "runtime-a"]
    assert host.metric("watcher_listener_events_accepted_total") == 2
    assert len(host.incarnations) == 2
    assert host.samples("watcher_listener_requests_total") == {
        (("code", "200"), ("server_name", "listener")): 2.0
    }
