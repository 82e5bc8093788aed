"""Facts about running processes read from ``/proc``, so the harness needs no psutil.

Two questions matter to the process owner and to reports: "is anything of this process
group still alive?" (a stop is only complete when the grandchildren are gone too) and
"how much memory does this process hold?" (RSS per cluster is a number we publish).
Zombies count as gone: on machines whose PID 1 does not reap orphans they linger forever
although they hold no resources.
"""

from __future__ import annotations

import os
from pathlib import Path

PROC = Path("/proc")


def _stat_fields(pid: int) -> list[str] | None:
    """Fields of ``/proc/<pid>/stat`` after the command name, or None if it is gone."""
    try:
        raw = (PROC / str(pid) / "stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # The command name is in parentheses and may itself contain spaces or ')'.
    return raw[raw.rfind(")") + 2 :].split()


def is_alive(pid: int) -> bool:
    """True if ``pid`` exists and is not a zombie."""
    if not PROC.is_dir():
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    fields = _stat_fields(pid)
    return fields is not None and fields[0] != "Z"


def group_members(pgid: int) -> list[int]:
    """PIDs of the live (non-zombie) processes whose process group is ``pgid``."""
    if not PROC.is_dir():  # not Linux: fall back to "does the group exist at all"
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return []
        except PermissionError:
            return [pgid]
        return [pgid]
    members = []
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat_fields(int(entry.name))
        # fields: state, ppid, pgrp, ...
        if fields is not None and fields[0] != "Z" and int(fields[2]) == pgid:
            members.append(int(entry.name))
    return members


def rss_bytes(pid: int) -> int | None:
    """Resident set size of ``pid`` (``VmRSS``), or None if unknown or the process is gone."""
    try:
        text = (PROC / str(pid) / "status").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    for line in text.splitlines():
        if line.startswith("VmRSS:"):
            value, unit = line.split()[1:3]
            return int(value) * 1024 if unit == "kB" else int(value)
    return None
