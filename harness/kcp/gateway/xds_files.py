"""Envoy's file-based xDS: write by rename, confirm on the admin endpoint, roll back.

Envoy notices a change only when a file is renamed into its watched directory, and tells
whether it took it only in admin stats. :meth:`XdsFiles.swap` writes the files in the order
``update_sequence`` gives, confirms each, and on failure puts back the last confirmed ones
(so a restart serves them too).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.kcp.gateway.envoy_admin import EnvoyAdmin
from harness.kcp.gateway.errors import GatewayError, GatewayUpdateRejected, GatewayUpdateTimeout
from watcher.pki import write_atomic
from watcher.render.envoy import EnvoyConfig, GatewayListener, XdsLayout, update_sequence

_POLL = 0.005  # s between admin polls while confirming a swap (Envoy applies in 2-10 ms)

ErrorFactory = Callable[[type[GatewayError], str], GatewayError]
"""Builds the error to raise, e.g. with the tail of Envoy's log appended."""


def exact(stat: str) -> str:
    """A stat name as a regex matching only itself (Envoy's admin filter is RE2)."""
    return re.escape(stat)


@dataclass(kw_only=True, eq=False)
class XdsFiles:
    """The xDS files of one gateway and what Envoy confirmed of them."""

    name: str
    layout: XdsLayout
    listener: Callable[[], GatewayListener]
    admin: Callable[[], EnvoyAdmin]
    timeout: float
    error: ErrorFactory
    _on_disk: dict[str, str] = field(default_factory=dict, init=False)
    """File name → the version_info written."""

    def write(self, file: str, content: Mapping[str, Any]) -> None:
        write_atomic(Path(self.layout.path(file)), json.dumps(content).encode(), mode=0o644)
        self._on_disk[file] = str(content["version_info"])

    def write_unconfirmed(self, previous: EnvoyConfig | None, config: EnvoyConfig) -> None:
        """Envoy is not running: it reads the files when it starts."""
        for file, content in update_sequence(previous, config):
            self.write(file, content)

    async def swap(self, previous: EnvoyConfig | None, config: EnvoyConfig) -> None:
        """Write and confirm every changed file; roll back to ``previous`` on failure."""
        try:
            for file, content in update_sequence(previous, config):
                baseline = await self._rejections(file)
                self.write(file, content)
                await self._confirm(file, content["version_info"], baseline)
        except GatewayError:
            if previous is not None:
                self._roll_back(previous)
            raise

    def version_stat(self, file: str) -> str:
        return self._stats(file) + "version_text"

    def _stats(self, file: str) -> str:
        """The prefix of the admin stats that tell whether ``file`` was applied or rejected."""
        if file == self.layout.lds_file:
            return "listener_manager.lds."
        if file == self.layout.cds_file:
            return "cluster_manager.cds."
        listener = self.listener()
        return f"http.{listener.stat_prefix}.rds.{listener.route_config_name}."

    async def _rejections(self, file: str) -> int:
        name = self._stats(file) + "update_rejected"
        return (await self.admin().stats(f"^{exact(name)}$")).get(name, 0)

    async def _confirm(self, file: str, version: str, baseline: int) -> None:
        stat = self.version_stat(file)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout
        while True:
            seen = (await self.admin().text_readouts(f"^{exact(stat)}$")).get(stat)
            if seen == version:
                return
            if await self._rejections(file) > baseline:
                raise self.error(
                    GatewayUpdateRejected,
                    f"{self.name}: Envoy rejected {file} version {version}; "
                    f"still serving version {seen}",
                )
            if loop.time() >= deadline:
                raise self.error(
                    GatewayUpdateTimeout,
                    f"{self.name}: {file} version {version} not applied after "
                    f"{self.timeout:.1f} s ({stat} is {seen!r})",
                )
            await asyncio.sleep(_POLL)  # polling a condition until the deadline

    def _roll_back(self, previous: EnvoyConfig) -> None:
        """Put the files of the confirmed config back, so a restart serves it too."""
        for file in (previous.layout.rds_file, previous.layout.lds_file):
            content = previous.files()[file]
            if self._on_disk.get(file) != content["version_info"]:
                self.write(file, content)
        cds = previous.cds()
        if self._on_disk.get(previous.layout.cds_file) != cds["version_info"]:
            # Clusters a half-applied update added go last, after routes no longer name them.
            self.write(previous.layout.cds_file, cds)
