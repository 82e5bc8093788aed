"""Free TCP ports on loopback, and recognising the race that picking them implies.

A port found by binding port 0 is free only until someone else binds it; between our
check and the server's bind, another xdist worker may take it. The servers we start then
die with "address already in use", which callers detect with :func:`address_in_use` and
answer by retrying with fresh ports (:func:`start_on_free_ports`).
"""

from __future__ import annotations

import socket
from collections.abc import Awaitable, Callable

from harness.errors import ProcessExitedEarly

LOOPBACK = "127.0.0.1"


def free_port(host: str = LOOPBACK) -> int:
    """A TCP port on ``host`` that was free a moment ago (bind port 0, read it back)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        port: int = s.getsockname()[1]
        return port


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
