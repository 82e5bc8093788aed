"""No ``Server`` header on our HTTP answers, as upstream's Go servers send none.

aiohttp names itself and Python's version in every answer (``Server: Python/3.11
aiohttp/3.x``): version disclosure a scanner flags, and a header upstream's webhook and
listener do not send. aiohttp adds it before the ``on_response_prepare`` signal, so the
signal handler here takes it out again.
"""

from __future__ import annotations

from aiohttp import hdrs, web


async def drop_server_header(request: web.Request, response: web.StreamResponse) -> None:
    del request
    response.headers.popall(hdrs.SERVER, None)


def without_server_header(app: web.Application) -> web.Application:
    """``app`` answering without a ``Server`` header."""
    app.on_response_prepare.append(drop_server_header)
    return app


__all__ = ["drop_server_header", "without_server_header"]
