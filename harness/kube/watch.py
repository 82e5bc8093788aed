"""Watching a resource as any controller needs it: list, then watch, for as long as asked.

:func:`watch_objects` keeps the resourceVersion bookkeeping in one place: a re-list on
410 Gone (reporting objects that vanished meanwhile as deleted), bookmarks, and a bounded,
growing backoff on errors, as an async iterator of ``(type, object)``.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Iterator
from typing import Literal, cast

import aiohttp
from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException

from harness import kube

logger = logging.getLogger("harness.kube")

WatchType = Literal["ADDED", "MODIFIED", "DELETED", "SYNCED"]


BACKOFF_INITIAL_S = 0.1
BACKOFF_MAX_S = 5.0
"""The delay before retrying after an error starts here and doubles up to the maximum."""


async def _watch_once(
    api: ApiClient,
    resource: kube.Resource,
    namespace: str | None,
    rv: str,
    label_selector: str | None,
    timeout_seconds: int,
) -> AsyncIterator[tuple[str, kube.Obj]]:
    """One watch request from ``rv`` until the server ends it; ``Gone`` on 410."""
    path = resource.path(namespace)
    query = [
        ("watch", "true"),
        ("allowWatchBookmarks", "true"),
        ("resourceVersion", rv),
        ("timeoutSeconds", str(timeout_seconds)),
    ]
    if label_selector:
        query.append(("labelSelector", label_selector))
    try:
        response = await api.call_api(
            path,
            "GET",
            query_params=query,
            header_params={"Accept": "application/json"},
            auth_settings=["BearerToken"],
            _preload_content=False,
            _request_timeout=aiohttp.ClientTimeout(sock_connect=10, sock_read=timeout_seconds + 15),
        )
    except ApiException as exc:
        raise kube.error_for_status(exc.status or 0, "WATCH", path, exc.body) from None
    async with response:
        if response.status != 200:
            raise kube.error_for_status(response.status, "WATCH", path, await response.read())
        while True:
            line = await response.content.readline()
            if not line:
                return
            event = json.loads(line)
            kind, obj = str(event.get("type", "")), event.get("object") or {}
            if kind == "ERROR":
                code = int(obj.get("code") or 0)
                raise kube.error_for_status(code, "WATCH", path, json.dumps(obj))
            yield kind, obj


def _changes_between(
    known: dict[str, kube.Obj], current: dict[str, kube.Obj]
) -> Iterator[tuple[WatchType, kube.Obj]]:
    """What a (re-)list says happened since ``known``: added, modified, vanished objects."""
    for key, item in current.items():
        old = known.get(key)
        if old is None:
            yield "ADDED", item
        elif kube.resource_version(old) != kube.resource_version(item):
            yield "MODIFIED", item
    for key in known.keys() - current.keys():
        yield "DELETED", known[key]


async def watch_objects(
    api: ApiClient,
    resource: kube.Resource,
    *,
    namespace: str | None = None,
    label_selector: str | None = None,
    timeout_seconds: int = 60,
) -> AsyncIterator[tuple[WatchType, kube.Obj]]:
    """List, then watch from the list's resourceVersion, forever (until the caller stops).

    Yields ``ADDED`` / ``MODIFIED`` / ``DELETED`` with the object, and ``SYNCED`` (with
    ``{"metadata": {"resourceVersion": ...}}``) each time a (re-)list has been fully
    reported — the first ``SYNCED`` means the consumer has seen every existing object.
    On 410 Gone it lists again and reports objects that vanished meanwhile as ``DELETED``
    and changed ones as ``MODIFIED``. Other errors (network, 5xx, a resource type not yet
    defined) are logged and retried after a bounded, growing delay.
    """
    known: dict[str, kube.Obj] = {}
    rv: str | None = None
    delay = BACKOFF_INITIAL_S
    where = f"{resource.plural} in {namespace or 'all namespaces'}"
    while True:
        try:
            if rv is None:
                items, rv = await kube.list_objects(
                    api, resource, namespace, label_selector=label_selector
                )
                current = {kube.object_key(item): item for item in items}
                for change in _changes_between(known, current):
                    yield change
                known = current
                delay = BACKOFF_INITIAL_S
                yield "SYNCED", {"metadata": {"resourceVersion": rv}}
            async for kind, obj in _watch_once(
                api, resource, namespace, rv, label_selector, timeout_seconds
            ):
                rv = kube.resource_version(obj) or rv
                delay = BACKOFF_INITIAL_S
                if kind == "BOOKMARK":
                    continue
                key = kube.object_key(resource.typed(obj))
                if kind == "DELETED":
                    known.pop(key, None)
                    yield "DELETED", obj
                elif kind in ("ADDED", "MODIFIED"):
                    known[key] = obj
                    yield cast(WatchType, kind), obj
        except kube.Gone:
            logger.info("watch of %s expired (410 Gone); listing again", where)
            rv = None
        except (kube.KubeError, aiohttp.ClientError, TimeoutError, ValueError) as exc:
            logger.warning("watch of %s failed, retrying in %.1f s: %s", where, delay, exc)
            await asyncio.sleep(delay)
            delay = min(delay * 2, BACKOFF_MAX_S)
