"""ServiceRegistry: the gateway's stand-in for cluster DNS, and its change notifications."""

from __future__ import annotations

from harness.kcp.gateway.routes import ServiceRegistry, service_key


def test_register_resolve_and_notify() -> None:
    registry = ServiceRegistry()
    changes: list[int] = []
    unsubscribe = registry.subscribe(lambda: changes.append(len(registry)))

    key = registry.register("klm-listener", "kcp-system", 8080, ("127.0.0.1", 40001))
    assert key == service_key("klm-listener", "kcp-system", 8080)
    assert key == "klm-listener.kcp-system.svc.cluster.local:8080"
    assert dict(registry) == {key: ("127.0.0.1", 40001)}
    registry.register("klm-listener", "kcp-system", 8080, ("127.0.0.1", 40001))  # no change
    registry.register("klm-listener", "kcp-system", 8080, ("127.0.0.1", 40002))
    registry.unregister("klm-listener", "kcp-system", 8080)
    registry.unregister("klm-listener", "kcp-system", 8080)  # already gone: no change
    assert changes == [1, 1, 0] and key not in registry

    unsubscribe()
    unsubscribe()  # idempotent
    registry.register("other", "kcp-system", 80, ("127.0.0.1", 1))
    assert changes == [1, 1, 0]
