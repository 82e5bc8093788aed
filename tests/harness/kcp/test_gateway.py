"""The KCP gateway with a real Envoy, real certificates and real listeners behind it."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from gateway_kit import (
    Pki,
    client_context,
    eventually,
    make_pki,
    post_event,
    service_key,
    virtual_service,
)

from harness.clusters import procfs
from harness.clusters.ports import free_port
from harness.kcp.gateway.envoy import EnvoyGateway
from harness.kcp.gateway.errors import GatewayError, GatewayUpdateRejected
from watcher.listener import Listener, ListenerConfig
from watcher.render.envoy import FaultInjection


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture
async def gateway(pki: Pki, tmp_path: Path) -> AsyncIterator[EnvoyGateway]:
    async with EnvoyGateway(pki.gateway, log_dir=tmp_path / "logs", concurrency=1) as gw:
        yield gw


@pytest.fixture
async def listener() -> AsyncIterator[Listener]:
    async with Listener(ListenerConfig(component="klm", identity="xfcc")) as lst:
        yield lst


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as s:
        yield s


def accepted(listener: Listener) -> float:
    return listener.metrics.value("watcher_listener_events_accepted_total")


async def route_klm(gateway: EnvoyGateway, listener: Listener) -> None:
    await gateway.update(
        [virtual_service("klm-watcher", "klm", "klm-listener")],
        {service_key("klm-listener"): ("127.0.0.1", listener.port)},
    )


async def test_event_reaches_listener_with_runtime_id_from_certificate(
    gateway: EnvoyGateway, listener: Listener, pki: Pki, session: aiohttp.ClientSession
) -> None:
    await route_klm(gateway, listener)
    context = client_context(pki, pki.runtime_cert, pki.runtime_key)
    url = gateway.url + "/v2/klm/event"

    status, body = await post_event(session, url, context)
    assert status == 200 and pki.runtime_id in body
    forged = {"X-Forwarded-Client-Cert": 'Hash=00;Subject="CN=intruder";Cert="garbage"'}
    assert (await post_event(session, url, context, headers=forged))[0] == 200

    events = listener.events()
    first = await asyncio.wait_for(events.get(), 2)
    second = await asyncio.wait_for(events.get(), 2)
    assert first.runtime_id == second.runtime_id == pki.runtime_id
    counters = await gateway.counters()
    assert counters.downstream_rq_2xx == 2
    assert counters.upstream_rq_2xx == {"klm-listener_kcp-system_8080": 2}

    status, _ = await post_event(session, gateway.url + "/v2/unknown/event", context)
    assert status == 404
    assert (await gateway.counters()).downstream_rq_4xx == 1


@pytest.mark.parametrize("who", ["foreign-ca", "no-cert"])
async def test_untrusted_clients_never_reach_the_listener(
    gateway: EnvoyGateway, listener: Listener, pki: Pki, who: str
) -> None:
    await route_klm(gateway, listener)
    if who == "foreign-ca":
        context = client_context(pki, pki.foreign_cert, pki.foreign_key)
        stat = "ssl_fail_verify_error"
    else:
        context = client_context(pki, None, None)
        stat = "ssl_fail_verify_no_cert"
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as s:
        # TLS 1.3: the client may see a reset or broken pipe rather than a handshake error.
        with pytest.raises((aiohttp.ClientError, OSError)):
            await post_event(s, gateway.url + "/v2/klm/event", context)

    async def rejected() -> bool:
        count: int = getattr(await gateway.counters(), stat)
        return count == 1

    await eventually(rejected, what=f"{stat} == 1")
    counters = await gateway.counters()
    assert counters.downstream_rq_2xx == 0 and counters.upstream_rq_2xx == {}
    assert accepted(listener) == 0


async def test_routes_follow_updates_without_restart(
    gateway: EnvoyGateway, pki: Pki, session: aiohttp.ClientSession
) -> None:
    context = client_context(pki, pki.runtime_cert, pki.runtime_key)
    pid = gateway.pid
    async with (
        Listener(ListenerConfig(component="klm")) as klm,
        Listener(ListenerConfig(component="other")) as other,
    ):
        assert (await post_event(session, gateway.url + "/v2/klm/event", context))[0] == 404
        resolver = {
            service_key("klm-listener"): ("127.0.0.1", klm.port),
            service_key("other-listener"): ("127.0.0.1", other.port),
        }
        both = [
            virtual_service("klm-watcher", "klm", "klm-listener"),
            virtual_service("other-watcher", "other", "other-listener"),
        ]
        started = time.perf_counter()
        await gateway.update(both, resolver)
        applied = time.perf_counter() - started
        for manager, target in (("klm", klm), ("other", other), ("klm", klm)):
            url = f"{gateway.url}/v2/{manager}/event"
            assert (await post_event(session, url, context))[0] == 200
            event = await asyncio.wait_for(target.events().get(), 2)
            assert event.runtime_id == pki.runtime_id
        assert accepted(klm) == 2 and accepted(other) == 1

        await gateway.update(both[:1], resolver)
        assert (await post_event(session, gateway.url + "/v2/other/event", context))[0] == 404
        assert (await post_event(session, gateway.url + "/v2/klm/event", context))[0] == 200
        assert accepted(other) == 1
        config = gateway.config
        assert config is not None and [c["name"] for c in config.clusters] == [
            "klm-listener_kcp-system_8080"
        ]
    assert gateway.pid == pid
    assert gateway.last_apply_seconds is not None
    print(f"two-route update applied in {applied * 1000:.1f} ms")


async def test_rejected_update_keeps_old_routes_and_raises(
    gateway: EnvoyGateway, listener: Listener, pki: Pki, session: aiohttp.ClientSession
) -> None:
    await route_klm(gateway, listener)
    version = await gateway.route_version()
    services = [
        virtual_service("klm-watcher", "klm", "klm-listener"),
        virtual_service("bad-watcher", "bad", "bad-listener"),
    ]
    resolver = {
        service_key("klm-listener"): ("127.0.0.1", listener.port),
        service_key("bad-listener"): ("999.1.1.1", 80),  # Envoy refuses this address
    }
    with pytest.raises(GatewayUpdateRejected, match=r"rejected cds\.yaml"):
        await gateway.update(services, resolver)

    context = client_context(pki, pki.runtime_cert, pki.runtime_key)
    assert (await post_event(session, gateway.url + "/v2/klm/event", context))[0] == 200
    assert (await post_event(session, gateway.url + "/v2/bad/event", context))[0] == 404
    assert await gateway.route_version() == version
    # The files were rolled back, so the next update starts from the confirmed state.
    await route_klm(gateway, listener)


async def test_fault_injection_via_rds(
    gateway: EnvoyGateway, listener: Listener, pki: Pki, session: aiohttp.ClientSession
) -> None:
    await route_klm(gateway, listener)
    context = client_context(pki, pki.runtime_cert, pki.runtime_key)
    url = gateway.url + "/v2/klm/event"
    lds_version = (await gateway.admin.text_readouts()).get("listener_manager.lds.version_text")

    await gateway.set_fault(FaultInjection(abort_percent=100, abort_status=503))
    statuses = [(await post_event(session, url, context))[0] for _ in range(5)]
    assert statuses == [503] * 5
    assert accepted(listener) == 0

    await gateway.set_fault(FaultInjection(delay_percent=100, delay_ms=300))
    started = time.perf_counter()
    assert (await post_event(session, url, context))[0] == 200
    delayed = time.perf_counter() - started
    # Envoy's timer fires on its own clock: seen at 299.3 ms for a 300 ms delay. Without
    # the fault the request takes a few ms, so 290 ms still proves the delay applied.
    assert 0.29 <= delayed < 2.0

    await gateway.set_fault(None)
    started = time.perf_counter()
    assert (await post_event(session, url, context))[0] == 200
    assert time.perf_counter() - started < 0.3
    assert accepted(listener) == 2
    after = (await gateway.admin.text_readouts()).get("listener_manager.lds.version_text")
    assert after == lds_version  # faults travelled by RDS only: no listener drain


async def test_stop_start_same_port_and_cleanup(
    pki: Pki, listener: Listener, session: aiohttp.ClientSession, tmp_path: Path
) -> None:
    context = client_context(pki, pki.runtime_cert, pki.runtime_key)
    async with EnvoyGateway(pki.gateway, log_dir=tmp_path, concurrency=1) as gateway:
        await route_klm(gateway, listener)
        port, first_pid, directory = gateway.port, gateway.pid, gateway.directory
        assert first_pid is not None
        assert gateway.record.ready_after is not None
        print(f"envoy ready after {gateway.record.ready_after * 1000:.0f} ms")

        await gateway.stop()
        assert not procfs.is_alive(first_pid) and gateway.pid is None
        with pytest.raises((aiohttp.ClientError, OSError)):
            await post_event(session, gateway.url + "/v2/klm/event", context)

        # Updates while stopped are written to the files and served after the start.
        await gateway.update([], {})
        await gateway.start()
        assert gateway.port == port and gateway.pid not in (None, first_pid)
        assert (await post_event(session, gateway.url + "/v2/klm/event", context))[0] == 404
        await route_klm(gateway, listener)
        assert (await post_event(session, gateway.url + "/v2/klm/event", context))[0] == 200

        await gateway.kill()
        assert gateway.record.exit_code == -9
        await gateway.start()
        assert (await post_event(session, gateway.url + "/v2/klm/event", context))[0] == 200
        pids = [r.pid for r in gateway.records]
        assert len(pids) == 3 and gateway.record.argv[0].endswith("envoy")
        assert "--disable-hot-restart" in gateway.record.argv
    assert all(pid is not None and not procfs.is_alive(pid) for pid in pids)
    assert not directory.exists()
    assert (tmp_path / "kcp-gateway.log").is_file()


async def test_taken_listener_port_fails_fast_with_the_log(pki: Pki, tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        gateway = EnvoyGateway(pki.gateway, port=port, admin_port=free_port(), log_dir=tmp_path)
        started = time.perf_counter()
        with pytest.raises(GatewayError, match="rejected its listener") as info:
            async with gateway:
                pass
        assert time.perf_counter() - started < 10
    assert "full log:" in str(info.value)
    assert gateway.record.pid is not None and not procfs.is_alive(gateway.record.pid)
