"""Kubeconfig documents for a local cluster's admin user.

Two shapes: one referring to certificate *files* (what the harness loads itself; loading
embedded data makes kubernetes_asyncio write temporary files that live until exit), and
one with the data *embedded* (self-contained, for handing to another process or storing
in a Secret the way Lifecycle Manager stores SKR kubeconfigs).
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import yaml


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode("ascii")


def render_kubeconfig(
    name: str,
    server: str,
    *,
    ca_file: Path,
    client_cert_file: Path,
    client_key_file: Path,
    embed: bool = False,
) -> str:
    """A kubeconfig with one cluster, one user ``<name>-admin`` and one current context."""
    cluster: dict[str, Any] = {"server": server}
    user: dict[str, Any] = {}
    if embed:
        cluster["certificate-authority-data"] = _b64(ca_file)
        user["client-certificate-data"] = _b64(client_cert_file)
        user["client-key-data"] = _b64(client_key_file)
    else:
        cluster["certificate-authority"] = str(ca_file)
        user["client-certificate"] = str(client_cert_file)
        user["client-key"] = str(client_key_file)
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": cluster}],
        "users": [{"name": f"{name}-admin", "user": user}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": f"{name}-admin"}}],
        "current-context": name,
        "preferences": {},
    }
    return yaml.safe_dump(doc, sort_keys=False)
