"""Free TCP ports on loopback, and recognising the race that picking them implies.

A port found by binding port 0 is free only until someone else binds it; between our
check and the server's bind, another xdist worker may take it. The servers we start then
die with "address already in use", which callers detect with :func:`address_in_use` and
answer by retrying with fresh ports.
"""

from __future__ import annotations

import socket

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
