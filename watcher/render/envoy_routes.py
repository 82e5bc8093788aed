"""VirtualService → routes and destinations (pure), the first step of the Envoy render."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from watcher.render.errors import RenderError


@dataclass(frozen=True, order=True)
class Destination:
    host: str
    port: int

    @property
    def key(self) -> str:
        """The resolver key, ``<host>:<port>``."""
        return f"{self.host}:{self.port}"

    @property
    def cluster_name(self) -> str:
        """Dot-free, so ``cluster.<name>.*`` stats stay parseable: ``<svc>_<ns>_<port>``."""
        base = self.host.removesuffix(".svc.cluster.local").replace(".", "_")
        return f"{base}_{self.port}"


@dataclass(frozen=True)
class Route:
    """One Envoy route taken from a VirtualService http route."""

    name: str
    match: Literal["prefix", "path"]
    value: str
    destination: Destination
    source: str
    """``<namespace>/<name>`` of the VirtualService it came from."""

    def sort_key(self) -> tuple[int, str, int, str, str]:
        # Longest path first, so a more specific prefix wins; exact before prefix.
        return (
            -len(self.value),
            self.value,
            0 if self.match == "path" else 1,
            self.name,
            self.source,
        )


def routes_from_virtual_service(vs: Mapping[str, Any]) -> list[Route]:
    """The routes of one VirtualService; ``RenderError`` for shapes the gateway cannot map."""
    meta = vs.get("metadata") or {}
    source = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
    spec = vs.get("spec")
    if not isinstance(spec, Mapping):
        raise RenderError(f"VirtualService {source} has no spec")
    routes: list[Route] = []
    problems: list[str] = []
    for i, http in enumerate(spec.get("http") or []):
        where = f"VirtualService {source} spec.http[{i}]"
        name = http.get("name") or f"{source}#{i}"
        targets = http.get("route") or []
        if len(targets) != 1:
            problems.append(f"{where}: needs exactly one route destination, got {len(targets)}")
            continue
        dest = targets[0].get("destination") or {}
        host, port = dest.get("host"), (dest.get("port") or {}).get("number")
        if not isinstance(host, str) or not host:
            problems.append(f"{where}.route[0].destination.host is missing")
            continue
        if not isinstance(port, int) or isinstance(port, bool) or not 1 <= port <= 65535:
            problems.append(f"{where}.route[0].destination.port.number must be 1..65535")
            continue
        matches = http.get("match") or []
        if not matches:
            problems.append(f"{where}: needs at least one uri match (no catch-all routes)")
        for j, match in enumerate(matches):
            uri = match.get("uri") or {}
            if set(match) - {"uri"} or len(uri) != 1 or not set(uri) <= {"prefix", "exact"}:
                problems.append(f"{where}.match[{j}]: only uri.prefix or uri.exact is supported")
                continue
            kind, value = next(iter(uri.items()))
            if not isinstance(value, str) or not value.startswith("/"):
                problems.append(f"{where}.match[{j}].uri.{kind} must be a path starting with /")
                continue
            routes.append(
                Route(
                    name=name,
                    match="prefix" if kind == "prefix" else "path",
                    value=value,
                    destination=Destination(host, port),
                    source=source,
                )
            )
    if problems:
        raise RenderError("; ".join(problems))
    return routes
