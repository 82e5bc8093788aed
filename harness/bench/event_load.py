"""The scale benchmark's load generator in Go (``tools/event-load``), driven from Python.

On a 2-core machine a Python TLS client costs about as much CPU per event as Envoy and the
listener together, so with the load generator in this process the wall rate measures the
generator. ``tools/event-load`` (Go standard library only, built and cached by
:func:`harness.clusters.go_tools.ensure_event_load`) sends the same POSTs from its own
process for a fraction of that CPU and reports its own CPU next to the servers'.

It prints one JSON line (:func:`parse_result`; ``tools/event-load/main.go`` documents
every field).

``WATCHER_BENCH_LOAD_GENERATOR`` picks the generator (:func:`choose_load_generator`):
``go`` (fail without Go), ``aiohttp`` (this process, as before the Go tool), or unset
(Go when a toolchain is there, else aiohttp and the reason in the report).
"""

from __future__ import annotations

import asyncio
import json
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.clusters.go_tools import ensure_event_load
from harness.clusters.process import OwnedProcess
from harness.errors import BinaryUnavailable

GENERATOR_ENV = "WATCHER_BENCH_LOAD_GENERATOR"
GENERATORS = ("go", "aiohttp")

# field → the types its value may have (bool is an int to isinstance: checked apart)
_NUMBER = (int, float)
_FIELDS: dict[str, tuple[type, ...]] = {
    "events": (int,),
    "seconds": _NUMBER,
    "events_per_s": _NUMBER,
    "latency_ms": (dict,),
    "statuses": (dict,),
    "complete": (bool,),
    "cpu_s": _NUMBER,
    "cpu_ms_per_event": _NUMBER,
    "cpu_of": (dict,),
    "warmup": (dict,),
}
_WARMUP_FIELDS: dict[str, tuple[type, ...]] = {
    "events": (int,),
    "seconds": _NUMBER,
    "statuses": (dict,),
    "complete": (bool,),
}


class EventLoadError(RuntimeError):
    """The load generator failed or printed something other than its one result line."""


@dataclass(frozen=True)
class Identity:
    """One simulated SKR as the load generator sees it: PEM file paths."""

    cert: str
    key: str
    ca: str


@dataclass(frozen=True)
class LoadGenerator:
    """The Go program when ``binary`` is set, else aiohttp in this process (``reason``:
    why)."""

    binary: Path | None
    reason: str = ""

    @property
    def name(self) -> str:
        return "go" if self.binary is not None else "aiohttp"


def choose_load_generator(
    env: Mapping[str, str] = os.environ,
    ensure: Callable[[], Path] = ensure_event_load,
) -> LoadGenerator:
    """The generator ``$WATCHER_BENCH_LOAD_GENERATOR`` asks for (builds the Go one if
    needed); unset: Go if it can be had, else aiohttp with the reason."""
    choice = env.get(GENERATOR_ENV, "").strip().lower()
    if choice and choice not in GENERATORS:
        raise ValueError(f"{GENERATOR_ENV}={choice!r}: want one of {', '.join(GENERATORS)}")
    if choice == "aiohttp":
        return LoadGenerator(None, f"{GENERATOR_ENV}=aiohttp")
    try:
        return LoadGenerator(ensure())
    except BinaryUnavailable as e:
        if choice == "go":
            raise
        return LoadGenerator(None, str(e))


def identities_json(identities: Sequence[Identity]) -> str:
    """The ``-identities`` file's text."""
    return json.dumps([{"cert": i.cert, "key": i.key, "ca": i.ca} for i in identities])


def go_duration(seconds: float) -> str:
    """``seconds`` as a Go duration flag value, in whole milliseconds (at least 1)."""
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"a duration must be positive, got {seconds}")
    return f"{max(1, round(seconds * 1000))}ms"


def command(
    binary: Path,
    *,
    url: str,
    identities_file: Path,
    body_file: Path,
    count: int,
    in_flight: int,
    budget_s: float,
    warmup: int,
    warmup_budget_s: float,
    conns_per_identity: int,
    cpu_of: Mapping[str, int] | None = None,
) -> list[str]:
    """The load generator's command line (``cpu_of``: name → pid whose CPU it reports)."""
    argv = [
        str(binary),
        "-url", url,
        "-identities", str(identities_file),
        "-body", str(body_file),
        "-count", str(count),
        "-in-flight", str(in_flight),
        "-budget", go_duration(budget_s),
        "-warmup", str(warmup),
        "-warmup-budget", go_duration(warmup_budget_s),
        "-conns-per-identity", str(conns_per_identity),
    ]  # fmt: skip
    for name, pid in (cpu_of or {}).items():
        argv += ["-cpu-of", f"{name}={pid}"]
    return argv


def _check_fields(data: dict[str, Any], fields: Mapping[str, tuple[type, ...]], where: str) -> None:
    for name, types in fields.items():
        value = data.get(name)
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            raise EventLoadError(f"{where}: field {name!r} is {value!r}, want {types}")


def parse_result(stdout: str) -> dict[str, Any]:
    """The one JSON object line the load generator printed, its fields checked."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    if len(lines) != 1:
        raise EventLoadError(
            f"event-load printed {len(lines)} lines, want one JSON line: {stdout[:500]!r}"
        )
    try:
        data = json.loads(lines[0])
    except json.JSONDecodeError as e:
        raise EventLoadError(f"event-load printed no JSON ({e}): {lines[0][:500]!r}") from e
    if not isinstance(data, dict):
        raise EventLoadError(f"event-load printed {type(data).__name__}, want an object")
    _check_fields(data, _FIELDS, "event-load result")
    _check_fields(data["warmup"], _WARMUP_FIELDS, "event-load warm-up")
    if not all(isinstance(v, int) for v in data["statuses"].values()):
        raise EventLoadError(f"event-load statuses are not counts: {data['statuses']!r}")
    return data


async def run_event_load(argv: Sequence[str], *, log_path: Path, within_s: float) -> dict[str, Any]:
    """Run the load generator (an owned process, stderr to ``log_path``) to its end, at
    most ``within_s`` seconds; its parsed result."""
    async with OwnedProcess("event-load", argv, log_path=log_path, stdout_pipe=True) as proc:
        try:
            async with asyncio.timeout(within_s):
                out = await proc.stdout.read()
        except TimeoutError:
            raise EventLoadError(
                f"event-load did not finish within {within_s:.0f} s; log: {log_path}"
            ) from None
        code = await proc.stop()
    if code != 0:
        said = [line for line in proc.log_tail(10).splitlines() if not line.startswith("### ")]
        raise EventLoadError(
            f"event-load exited with code {code}: {' / '.join(said[-5:])} (log: {log_path})"
        )
    return parse_result(out.decode("utf-8", "replace"))
