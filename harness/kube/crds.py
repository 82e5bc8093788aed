"""Objects from YAML files, and CRDs applied until the API server serves them.

A CRD is usable only once it is Established: a custom resource written before that is
refused. Every environment, test fixture and the KLM's SKR set-up applies its CRDs and
waits, so :func:`apply_crds` does both in one call; :func:`wait_established` is the wait
alone, for CRDs applied among other objects.
"""

from __future__ import annotations

import asyncio
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


def _established(crd: Mapping[str, Any]) -> bool:
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


async def wait_established(
    api: ApiClient, names: Iterable[str], *, within: float, poll: float = 0.05
) -> None:
    """Until every CRD of ``names`` is Established; :class:`NotEstablished` after ``within``."""
    deadline = time.monotonic() + within
    for name in names:
        while True:
            crd = await get(api, CRDS, name)
            if crd is not None and _established(crd):
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
