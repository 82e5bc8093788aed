"""Envoy's admin endpoint as the gateway reads it: readiness, counters, version texts.

Text readouts such as ``http.<prefix>.rds.<route>.version_text`` come from ``/stats`` text,
as the JSON format does not carry them in every Envoy version.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from watcher.render.envoy import GatewayListener

_TEXT_READOUT = re.compile(r'^(?P<name>[^:\s]+): "(?P<value>.*)"$')


def parse_stats_json(document: Any) -> dict[str, int]:
    """``/stats?format=json`` → name → integer value (histograms and text readouts dropped)."""
    stats: dict[str, int] = {}
    for entry in document.get("stats", []) if isinstance(document, dict) else []:
        name, value = entry.get("name"), entry.get("value")
        if isinstance(name, str) and isinstance(value, int) and not isinstance(value, bool):
            stats[name] = value
    return stats


def parse_text_readouts(text: str) -> dict[str, str]:
    """``/stats`` text → name → value of every quoted (text readout) line."""
    readouts: dict[str, str] = {}
    for line in text.splitlines():
        match = _TEXT_READOUT.match(line.strip())
        if match:
            readouts[match["name"]] = match["value"]
    return readouts


@dataclass(frozen=True)
class GatewayCounters:
    """A snapshot of the counters scenarios assert on."""

    ssl_handshake: int
    ssl_fail_verify_error: int  # client certificate from an untrusted CA
    ssl_fail_verify_no_cert: int  # no client certificate
    downstream_rq_2xx: int
    downstream_rq_4xx: int
    downstream_rq_5xx: int
    upstream_rq_2xx: Mapping[str, int] = field(default_factory=dict)  # cluster → count


def gateway_counters(stats: Mapping[str, int], listener: GatewayListener) -> GatewayCounters:
    """The counters of ``listener`` (TLS, HTTP) and of every upstream cluster in ``stats``."""
    tls = f"listener.{listener.address}_{listener.port}.ssl."
    http = f"http.{listener.stat_prefix}.downstream_rq_"
    upstream: dict[str, int] = {}
    for name, value in stats.items():
        if name.startswith("cluster.") and name.endswith(".upstream_rq_2xx"):
            cluster = name.removeprefix("cluster.").removesuffix(".upstream_rq_2xx")
            if "." not in cluster:  # not the .external/.internal breakdowns
                upstream[cluster] = value
    return GatewayCounters(
        ssl_handshake=stats.get(tls + "handshake", 0),
        ssl_fail_verify_error=stats.get(tls + "fail_verify_error", 0),
        ssl_fail_verify_no_cert=stats.get(tls + "fail_verify_no_cert", 0),
        downstream_rq_2xx=stats.get(http + "2xx", 0),
        downstream_rq_4xx=stats.get(http + "4xx", 0),
        downstream_rq_5xx=stats.get(http + "5xx", 0),
        upstream_rq_2xx=upstream,
    )


@dataclass(frozen=True)
class EnvoyAdmin:
    """Client for one Envoy admin endpoint; the session belongs to the caller."""

    session: aiohttp.ClientSession
    url: str  # http://127.0.0.1:<port>

    async def ready(self) -> tuple[int, str]:
        """Status and body of ``/ready`` (200 ``LIVE`` once initialised)."""
        async with self.session.get(f"{self.url}/ready") as response:
            return response.status, (await response.text()).strip()

    async def stats(self, filter_regex: str | None = None) -> dict[str, int]:
        params = {"format": "json"}
        if filter_regex:
            params["filter"] = filter_regex
        async with self.session.get(f"{self.url}/stats", params=params) as response:
            response.raise_for_status()
            return parse_stats_json(json.loads(await response.text()))

    async def text_readouts(self, filter_regex: str | None = None) -> dict[str, str]:
        params = {"filter": filter_regex} if filter_regex else {}
        async with self.session.get(f"{self.url}/stats", params=params) as response:
            response.raise_for_status()
            return parse_text_readouts(await response.text())
