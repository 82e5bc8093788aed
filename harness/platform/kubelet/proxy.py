"""A user-space kube-proxy: listens on ``<ClusterIP>:<port>`` (loopback ClusterIPs, see
:func:`~harness.clusters.apiserver.loopback_service_range`) while the Service's slices, as
read back, have an endpoint (none: refused, as kube-proxy's REJECT rule does), and
forwards each connection to the host port the endpoint's pod publishes its port on."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable

from harness.platform.kubelet.status import Route
from harness.skr.bridge import Bridges, Streams

logger = logging.getLogger("harness.platform.kubelet")

HostPort = Callable[[str, int], int | None]
"""Pod IP and container port → the host port it is published on (None: not running)."""


class Proxy:
    def __init__(self, cluster: str, host_port: HostPort) -> None:
        self.cluster = cluster
        self.errors: dict[str, str] = {}
        """``<ClusterIP>:<port>`` → why it cannot be listened on."""
        self._host_port = host_port
        self._servers: dict[tuple[str, int], asyncio.Server] = {}
        self._routes: dict[tuple[str, int], Route] = {}
        self._bridges = Bridges()

    @property
    def routes(self) -> list[Route]:
        """The ClusterIP ports served, with their endpoints."""
        return [self._routes[key] for key in self._servers]

    async def sync(self, routes: Iterable[Route]) -> None:
        """Serve exactly the routes that have endpoints."""
        wanted = {r.key: r for r in routes if r.endpoints}
        for key in [k for k in self._servers if k not in wanted]:
            self._servers.pop(key).close()
            logger.info("kubelet[%s]: kube-proxy: %s:%d closed", self.cluster, *key)
        self._routes.update(wanted)
        for route in wanted.values():
            if route.key not in self._servers:
                await self._listen(route)

    async def _listen(self, route: Route) -> None:
        where = f"{route.cluster_ip}:{route.port}"
        try:
            self._servers[route.key] = await asyncio.start_server(
                self._bridges.handler(lambda: self._open(route.key)),
                host=route.cluster_ip,
                port=route.port,
                reuse_address=True,
            )
        except OSError as exc:
            hint = "" if route.cluster_ip.startswith("127.") else " (use loopback_service_range)"
            if where not in self.errors:
                logger.warning("kubelet[%s]: kube-proxy: %s: %s%s", self.cluster, where, exc, hint)
            self.errors[where] = f"service {route.service}: cannot listen on {where}: {exc}{hint}"
            return
        self.errors.pop(where, None)
        logger.info("kubelet[%s]: kube-proxy: %s → %s", self.cluster, where, route.service)

    async def _open(self, key: tuple[str, int]) -> Streams:
        """A connection to the first endpoint that accepts one."""
        for address, port in self._routes[key].endpoints if key in self._servers else ():
            host_port = self._host_port(address, port)
            if host_port is not None:
                try:
                    return await asyncio.open_connection("127.0.0.1", host_port)
                except OSError:
                    continue
        raise ConnectionRefusedError(f"no reachable endpoint for {key[0]}:{key[1]}")

    async def close(self) -> None:
        for server in self._servers.values():
            server.close()
        self._servers.clear()
        await self._bridges.close()
