"""Ports for the servers the harness starts: reserved, so that no one else takes them.

A part keeps its port across a stop and a start (a fault), and while it is down, any
process binding port 0 could be handed that port by the kernel — another xdist worker's
server, or any program's outgoing connection. So ports come from below the kernel's
ephemeral range (``ip_local_port_range``; the kernel never hands those out by itself),
and each is reserved for this process by a lock file other harness processes respect
(:func:`free_port`). What is left is the race with a program that binds a fixed port in
that range: servers that die with "address already in use" are detected
(:func:`address_in_use`) and started again on fresh ports (:func:`start_on_free_ports`).
"""

from __future__ import annotations

import fcntl
import functools
import os
import random
import socket
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path

from harness.errors import ProcessExitedEarly

LOOPBACK = "127.0.0.1"
RESERVED_PORTS = 8192
"""How many ports below the ephemeral range the harness picks from."""

_held: dict[int, int] = {}
"""Port → the open lock file that reserves it for this process (closed at exit)."""


def _ephemeral_start() -> int:
    try:
        text = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text(encoding="ascii")
        return int(text.split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


@functools.cache
def _lock_dir() -> Path:
    path = Path(tempfile.gettempdir()) / f"watcher-harness-ports-{os.getuid()}"
    path.mkdir(mode=0o700, exist_ok=True)
    return path


def _reserve(port: int) -> bool:
    fd = os.open(_lock_dir() / str(port), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return False
    _held[port] = fd
    return True


def _bindable(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = LOOPBACK) -> int:
    """A TCP port on ``host``, free now and reserved for this process until it exits:
    below the ephemeral range, locked against other harness processes (parallel workers,
    parallel runs). If none is left, one the kernel picks (bind port 0)."""
    end = _ephemeral_start()
    first = max(1024, end - RESERVED_PORTS)
    candidates = list(range(first, end))
    offset = random.randrange(len(candidates))
    for port in candidates[offset:] + candidates[:offset]:
        if port in _held or not _reserve(port):
            continue
        if _bindable(host, port):
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        picked: int = s.getsockname()[1]
        return picked


def address_in_use(log_text: str) -> bool:
    """True if a server's log says it failed to bind because the port was taken."""
    return "address already in use" in log_text.lower()


PORT_ATTEMPTS = 3


def exited_on_a_taken_port(exc: Exception) -> bool:
    """True if a server exited because another process took its port before it bound it."""
    return isinstance(exc, ProcessExitedEarly) and address_in_use(str(exc))


async def start_on_free_ports(
    start: Callable[[], Awaitable[None]],
    *,
    attempts: int = PORT_ATTEMPTS,
    port_taken: Callable[[Exception], bool] = exited_on_a_taken_port,
) -> None:
    """Await ``start`` — which picks fresh free ports itself each time — again while it
    fails because another process took a port between the pick and the bind (what
    ``port_taken`` says of the error); any other failure, or the last attempt's, propagates."""
    for attempt in range(1, attempts + 1):
        try:
            await start()
            return
        except Exception as exc:
            if attempt == attempts or not port_taken(exc):
                raise
