"""Our webhook made wrong on purpose, to show the conformance checks catch it.

``python wrong_webhook.py capitalised-gvk``: the event body spells ``WatchedGvk``;
``python wrong_webhook.py error-500``: a body that is not JSON is answered 500. Anything
else about it is our ``watcher-webhook`` in its upstream-like sync mode.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from aiohttp import web

import watcher.model
from watcher.webhook import app, server

fault = sys.argv[1]
os.environ["WATCHER_DELIVERY_MODE"] = "sync"
if fault == "capitalised-gvk":
    original = watcher.model.event_to_json

    def capitalised(event: watcher.model.WatchEvent) -> dict[str, Any]:
        body = original(event)
        body["WatchedGvk"] = body.pop("watchedGvk")
        return body

    watcher.model.event_to_json = capitalised
elif fault == "error-500":

    def server_error(status: int, error: str, **headers: str) -> web.Response:
        return web.json_response({"error": error}, status=500 if status == 400 else status)

    app.error_response = server_error
else:
    sys.exit(f"unknown fault {fault!r}")
sys.argv = sys.argv[:1]
server.main()
