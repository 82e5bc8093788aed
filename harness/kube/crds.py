"""Objects from YAML files, and CRDs applied until the API server serves them.

A CRD is usable only once it is Established: a custom resource written before that is
refused. Every environment, test fixture and the KLM's SKR set-up applies its CRDs and
waits, so :func:`apply_crds` does both in one call; :func:`wait_established` is the wait
alone, for CRDs applied among other objects. And for 2 s after that, kube-apiserver
sleeps 2 s in every create of the CRD's objects (:func:`wait_creatable`).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml
from kubernetes_asyncio.client import ApiClient

from harness.kube import CRDS, KubeError, NotEstablished, Obj, apply, get, name_of


def load_yaml_documents(path: str | Path) -> list[Obj]:
    """The non-empty YAML documents of a file."""
    with open(path, encoding="utf-8") as stream:
        return [dict(doc) for doc in yaml.safe_load_all(stream) if doc]


CREATE_HOLD_S = 2.0
"""kube-apiserver sleeps this long in each create of a custom resource whose CRD became
Established less than this long ago (apiextensions-apiserver ``customresource_handler.go``,
``justCreated``: in an HA control plane, time for the other servers to see the CRD too).
Its clock is the condition's ``lastTransitionTime``, which is stored to the second."""


def _established_condition(crd: Mapping[str, Any]) -> Mapping[str, Any] | None:
    conditions = (crd.get("status") or {}).get("conditions") or []
    for c in conditions:
        if c.get("type") == "Established" and c.get("status") == "True":
            return dict(c)
    return None


def is_established(crd: Mapping[str, Any]) -> bool:
    """Whether ``crd`` (as read from the API) is Established."""
    return _established_condition(crd) is not None


def creatable_at(crd: Mapping[str, Any]) -> float:
    """When (``time.time()``) creates of ``crd``'s objects stop being held
    (:data:`CREATE_HOLD_S` after Established by the condition's own clock); 0 when the
    CRD is not Established or says no time."""
    condition = _established_condition(crd)
    stamp = (condition or {}).get("lastTransitionTime")
    if not stamp:
        return 0.0
    established = dt.datetime.fromisoformat(str(stamp).replace("Z", "+00:00"))
    return established.timestamp() + CREATE_HOLD_S


async def wait_creatable(api: ApiClient, names: Iterable[str]) -> None:
    """Until creating objects of the CRDs ``names`` no longer sleeps (:data:`CREATE_HOLD_S`):
    waiting here, alongside whatever else starts, instead of in front of a first write."""
    crds = await asyncio.gather(*(get(api, CRDS, name) for name in names))
    latest = max((creatable_at(crd) for crd in crds if crd is not None), default=0.0)
    delay = latest - time.time()
    if delay > 0:
        await asyncio.sleep(delay + 0.05)  # the hold compares with "<": step past it


async def wait_established(
    api: ApiClient, names: Iterable[str], *, within: float, poll: float = 0.05
) -> None:
    """Until every CRD of ``names`` is Established; :class:`NotEstablished` after ``within``."""
    deadline = time.monotonic() + within
    for name in names:
        while True:
            crd = await get(api, CRDS, name)
            if crd is not None and is_established(crd):
                break
            if time.monotonic() >= deadline:
                conditions = (crd or {}).get("status", {}).get("conditions")
                raise NotEstablished(
                    f"CRD {name} not Established within {within:g} s; last conditions: "
                    f"{conditions!r}; check the API server log"
                )
            await asyncio.sleep(poll)


async def apply_crds(
    api: ApiClient,
    paths: Iterable[str | Path],
    *,
    within: float = 30.0,
    poll: float = 0.05,
) -> list[str]:
    """Server-side apply every CRD in the YAML files; return their names once Established."""
    names: list[str] = []
    for path in paths:
        for doc in load_yaml_documents(path):
            if doc.get("kind") != "CustomResourceDefinition":
                kind = doc.get("kind")
                raise KubeError(f"{path}: expected only CustomResourceDefinitions, got {kind!r}")
            names.append(name_of(await apply(api, CRDS, doc)))
    await wait_established(api, names, within=within, poll=poll)
    return names
