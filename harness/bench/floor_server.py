"""The cheapest admission server aiohttp allows: the floor under the webhook's own cost.

``python -m harness.bench.floor_server``, configured like the webhook (``WEBHOOK_HOST``,
``WEBHOOK_PORT``, ``TLS_CERT``, ``TLS_KEY``): one TLS server whose only route reads the
body, decodes it and answers ``allowed: true`` for its uid - no validation, no decision,
no metrics, no delivery. What the benchmark measures of it is what HTTP + TLS + JSON cost
per admission on this machine in Python, so a target below it names the stack, not the
webhook's code.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import ssl

from aiohttp import web


async def _admit(request: web.Request) -> web.Response:
    review = json.loads(await request.read())
    uid = review["request"]["uid"]
    answer = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": uid, "allowed": True},
    }
    return web.Response(body=json.dumps(answer).encode(), content_type="application/json")


async def serve() -> None:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(os.environ["TLS_CERT"], os.environ["TLS_KEY"])
    app = web.Application()
    app.router.add_post("/validate/{manager}", _admit)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    host, port = os.environ.get("WEBHOOK_HOST", "127.0.0.1"), int(os.environ["WEBHOOK_PORT"])
    await web.TCPSite(runner, host, port, ssl_context=ctx).start()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()


if __name__ == "__main__":
    asyncio.run(serve())
