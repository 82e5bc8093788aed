"""Run a console entry point under cProfile: ``python -m harness.bench.profiled OUT MOD:FUNC
[ARGS ...]``; the statistics are written to ``OUT`` when the program ends (SIGTERM included,
since the product's servers stop cleanly on it). :class:`Profile` summarises them.
"""

from __future__ import annotations

import cProfile
import importlib
import pstats
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.bench.model import Cell, Table

_IO = ("socket", "_ssl", "select.epoll", "SSLObject", "SSLSocket")


def _package(file: str, name: str) -> str:
    """Where a profiled function lives: a package, a stdlib module, or socket/TLS I/O."""
    if file == "~":
        return "socket + TLS I/O (C)" if any(k in name for k in _IO) else "builtins (C)"
    parts = Path(file).parts
    if "site-packages" in parts:
        return parts[parts.index("site-packages") + 1].removesuffix(".py")
    for root in ("watcher", "harness"):
        if root in parts:
            return root
    for i, part in enumerate(parts):
        if part.startswith("python3") and i + 1 < len(parts):
            return parts[i + 1].removesuffix(".py") + " (stdlib)"
    return "other"


def by_package(path: Path, limit: int = 8) -> list[tuple[str, float, float]]:
    """[(package, own seconds, share of total)] descending: where the CPU time went."""
    stats = pstats.Stats(str(path))
    totals: dict[str, float] = {}
    for (file, _, name), (_, _, tottime, _, _) in stats.stats.items():  # type: ignore[attr-defined]
        key = _package(file, name)
        totals[key] = totals.get(key, 0.0) + tottime
    total = sum(totals.values()) or 1.0
    ordered = sorted(totals.items(), key=lambda kv: kv[1], reverse=True)[:limit]
    return [(name, own, own / total) for name, own in ordered]


def top_functions(path: Path, limit: int = 8) -> tuple[float, list[tuple[str, float, float]]]:
    """(total seconds, [(function, own seconds, share of total)]) by own time, descending."""
    stats = pstats.Stats(str(path))
    rows = []
    total = 0.0
    for (file, line, name), (_, _, tottime, _, _) in stats.stats.items():  # type: ignore[attr-defined]
        total += tottime
        short = "/".join(Path(file).parts[-2:]) if file != "~" else ""
        rows.append((f"{short}:{line}({name})" if short else name, tottime))
    rows.sort(key=lambda r: r[1], reverse=True)
    return total, [(name, own, own / total if total else 0.0) for name, own in rows[:limit]]


def _shares(rows: list[tuple[str, float, float]], key: str) -> list[dict[str, Any]]:
    return [{key: n, "own_s": round(o, 4), "share": round(f, 4)} for n, o, f in rows]


@dataclass(frozen=True)
class Profile:
    """A profile's summary: total own seconds, top functions, own time by package."""

    total: float
    top: list[tuple[str, float, float]]
    packages: list[tuple[str, float, float]]

    @classmethod
    def read(cls, path: Path) -> Profile:
        total, top = top_functions(path, limit=6)
        return cls(total, top, by_package(path))

    def table(self, title: str, note: str) -> Table:
        """Own time by package, then the top four functions."""
        rows: list[tuple[Cell, ...]] = [
            (name, round(own, 3), f"{share:.0%}") for name, own, share in self.packages
        ]
        rows += [(f"top function: {n}", round(o, 3), f"{f:.0%}") for n, o, f in self.top[:4]]
        return Table(title, ("own time in", "seconds", "share"), tuple(rows), note=note)

    def by_package_json(self) -> list[dict[str, Any]]:
        return _shares(self.packages, "package")

    def top_json(self) -> list[dict[str, Any]]:
        return _shares(self.top, "function")

    def shares(self, count: int) -> str:
        """``watcher 40%, aiohttp 20%, ...``: the first ``count`` packages."""
        return ", ".join(f"{name} {share:.0%}" for name, _, share in self.packages[:count])


def main() -> int:
    out, target, *args = sys.argv[1:]
    module, _, func = target.partition(":")
    entry = getattr(importlib.import_module(module), func)
    sys.argv = [target, *args]
    # CPU time, not wall time: with the default timer a server's wait in epoll counts as
    # "own time" of poll() and hides where the CPU goes.
    profiler = cProfile.Profile(time.process_time)
    try:
        profiler.runcall(entry)
    except SystemExit as exc:
        return int(exc.code or 0) if isinstance(exc.code, int) else 0
    finally:
        profiler.dump_stats(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
