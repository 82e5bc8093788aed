"""Where the cluster backend reports progress: a rich console on stderr.

Animated status lines only help a person at a terminal; in CI or when output is piped they
become noise in logs, so :func:`interactive` decides whether to animate and callers print
only short plain lines otherwise.
"""

from __future__ import annotations

import os

from rich.console import Console


def make_console() -> Console:
    """A console on stderr (stdout stays free for machine-readable output)."""
    return Console(stderr=True, highlight=False)


def interactive(console: Console) -> bool:
    """True when animations are welcome: a terminal, and not CI."""
    return console.is_terminal and not os.environ.get("CI")


def format_bytes(n: int) -> str:
    """``1536 → '1.5 KiB'``: memory sizes in reports."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")
