"""A listener that is wrong on purpose: it takes every event, client certificate or not.

``python wrong_listener.py --component C --port P``: answers 200 to any POST on
``/v2/C/event`` (405 to a GET, as the probe expects) and prints an event line for it with
the runtime id ``anonymous`` — what a listener that forgot the XFCC check would do.
"""

from __future__ import annotations

import argparse
import json
import time

from aiohttp import web

parser = argparse.ArgumentParser()
parser.add_argument("--component", required=True)
parser.add_argument("--port", type=int, required=True)
args = parser.parse_args()


async def event(request: web.Request) -> web.Response:
    if request.method != "POST":
        return web.Response(status=405)
    try:
        body = json.loads(await request.read())
        watched, gvk = body["watched"], body["watchedGvk"]
    except (ValueError, KeyError, TypeError):
        return web.Response(status=200)
    line = {
        "runtime_id": "anonymous",
        "watched": {"namespace": watched.get("Namespace", ""), "name": watched.get("Name", "")},
        "watched_gvk": gvk,
        "received_at": time.time(),
    }
    print(json.dumps(line), flush=True)
    return web.Response(status=200)


app = web.Application()
app.router.add_route("*", f"/v2/{args.component}/event", event)
web.run_app(app, host="127.0.0.1", port=args.port, print=None)
