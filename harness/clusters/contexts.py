"""Kubeconfig contexts: pick one out of a user's file, and write one for each cluster.

No network, no processes. The ``kubeconfig`` backend addresses clusters only through
kubeconfig files: :func:`select_context` reads one context (its cluster and user) from a
file as :class:`ContextAccess`, resolving relative certificate paths against the file's
directory as kubectl does; :func:`single_context_kubeconfig` writes it back as a
one-context document with everything embedded, so the harness never depends on the
user's file staying put; :func:`find_context` looks through several files as ``KUBECONFIG``
does; :func:`merged_kubeconfig` joins several clusters into one file
with a context per cluster (what ``make e2e-kubeconfig`` hands to the backend);
:func:`render_kubeconfig` writes a local cluster's admin kubeconfig.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from harness.errors import ClusterError


class KubeconfigError(ClusterError):
    """A kubeconfig file or context that cannot be used; the message says which and why."""


@dataclass(frozen=True)
class ContextAccess:
    """How to reach one cluster: server, trust and credentials (PEM bytes, token)."""

    context: str
    server: str
    ca_pem: bytes | None = None  # None: the system's trust store
    client_cert_pem: bytes | None = None
    client_key_pem: bytes | None = None
    token: str | None = field(default=None, repr=False)
    insecure: bool = False
    tls_server_name: str | None = None

    @property
    def uses_client_certificate(self) -> bool:
        return self.client_cert_pem is not None and self.client_key_pem is not None


def _named(doc: Mapping[str, Any], section: str, name: str, path: str) -> Mapping[str, Any]:
    for entry in doc.get(section) or []:
        if isinstance(entry, Mapping) and entry.get("name") == name:
            value = entry.get(section[:-1])  # clusters → cluster, users → user, ...
            return value if isinstance(value, Mapping) else {}
    have = sorted(str(e.get("name")) for e in doc.get(section) or [] if isinstance(e, Mapping))
    raise KubeconfigError(f"{path}: no {section[:-1]} named {name!r} (have: {have})")


def _resolve(file: object, base: Path | None) -> Path:
    """A path from a kubeconfig: relative ones are relative to its directory (as kubectl)."""
    path = Path(str(file)).expanduser()
    return base / path if base is not None and not path.is_absolute() else path


def _data(
    entry: Mapping[str, Any], key: str, base: Path | None, path: str, what: str
) -> bytes | None:
    """``<key>-data`` (base64) or the file ``<key>`` (relative to the kubeconfig's dir)."""
    data = entry.get(f"{key}-data")
    if data:
        try:
            return base64.b64decode(str(data), validate=True)
        except ValueError as exc:
            raise KubeconfigError(f"{path}: {what} {key}-data is not base64: {exc}") from None
    file = entry.get(key)
    if not file:
        return None
    file_path = _resolve(file, base)
    try:
        return file_path.read_bytes()
    except OSError as exc:
        raise KubeconfigError(f"{path}: {what} {key} {file_path}: {exc.strerror}") from None


def select_context(
    text: str, context: str | None = None, *, path: str = "<kubeconfig>", base: Path | None = None
) -> ContextAccess:
    """Context ``context`` (default: the file's current context) of the kubeconfig ``text``.

    Refuses what the harness cannot use without running other programs (``exec`` and
    ``auth-provider`` plugins): the message says to write a token or certificate instead.
    """
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise KubeconfigError(f"{path}: not YAML: {exc}") from None
    if not isinstance(doc, Mapping) or doc.get("kind", "Config") != "Config":
        raise KubeconfigError(f"{path}: not a kubeconfig (kind: Config)")
    name = context or doc.get("current-context")
    if not name:
        raise KubeconfigError(f"{path}: no context given and no current-context set")
    ctx = _named(doc, "contexts", str(name), path)
    cluster_name, user_name = ctx.get("cluster"), ctx.get("user")
    if not cluster_name:
        raise KubeconfigError(f"{path}: context {name!r} names no cluster")
    cluster = _named(doc, "clusters", str(cluster_name), path)
    user = _named(doc, "users", str(user_name), path) if user_name else {}
    server = cluster.get("server")
    if not server:
        raise KubeconfigError(f"{path}: cluster {cluster_name!r} has no server")
    for plugin in ("exec", "auth-provider"):
        if user.get(plugin):
            raise KubeconfigError(
                f"{path}: user {user_name!r} of context {name!r} uses an {plugin} plugin; "
                "the harness needs a client certificate or a token in the kubeconfig"
            )
    token = _token(user, base, path)
    access = ContextAccess(
        context=str(name),
        server=str(server),
        ca_pem=_data(cluster, "certificate-authority", base, path, f"cluster {cluster_name!r}"),
        client_cert_pem=_data(user, "client-certificate", base, path, f"user {user_name!r}"),
        client_key_pem=_data(user, "client-key", base, path, f"user {user_name!r}"),
        token=token,
        insecure=bool(cluster.get("insecure-skip-tls-verify", False)),
        tls_server_name=cluster.get("tls-server-name"),
    )
    if (access.client_cert_pem is None) != (access.client_key_pem is None):
        raise KubeconfigError(f"{path}: user {user_name!r} has a client certificate without key")
    if not access.uses_client_certificate and access.token is None:
        raise KubeconfigError(
            f"{path}: user {user_name!r} of context {name!r} has no client certificate and "
            "no token; the harness needs one of them"
        )
    return access


def _token(user: Mapping[str, Any], base: Path | None, path: str) -> str | None:
    """``token``, or the contents of ``tokenFile`` (relative to the kubeconfig's dir)."""
    token = user.get("token")
    token_file = user.get("tokenFile")
    if not token and token_file:
        token_path = _resolve(token_file, base)
        try:
            token = token_path.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise KubeconfigError(f"{path}: tokenFile {token_path}: {exc.strerror}") from None
    return str(token) if token else None


def _context_names(text: str) -> list[str]:
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError:
        return []
    if not isinstance(doc, Mapping):
        return []
    return [str(c.get("name")) for c in doc.get("contexts") or [] if isinstance(c, Mapping)]


def find_context(paths: Sequence[Path], context: str) -> ContextAccess:
    """Context ``context`` from the first of ``paths`` that defines it."""
    tried: list[str] = []
    for path in paths:
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            tried.append(f"{path} ({exc.strerror})")
            continue
        names = _context_names(text)
        if context in names:
            return select_context(text, context, path=str(path), base=path.parent)
        tried.append(f"{path} (contexts: {', '.join(names) or 'none'})")
    raise KubeconfigError(f"no kubeconfig context {context!r} in {'; '.join(tried) or 'no files'}")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _entries(access: ContextAccess) -> tuple[dict[str, Any], dict[str, Any]]:
    cluster: dict[str, Any] = {"server": access.server}
    if access.ca_pem is not None:
        cluster["certificate-authority-data"] = _b64(access.ca_pem)
    if access.insecure:
        cluster["insecure-skip-tls-verify"] = True
    if access.tls_server_name:
        cluster["tls-server-name"] = access.tls_server_name
    user: dict[str, Any] = {}
    if access.client_cert_pem is not None and access.client_key_pem is not None:
        user["client-certificate-data"] = _b64(access.client_cert_pem)
        user["client-key-data"] = _b64(access.client_key_pem)
    if access.token is not None:
        user["token"] = access.token
    return cluster, user


def _document(entries: Mapping[str, tuple[dict[str, Any], dict[str, Any]]], current: str) -> str:
    """A kubeconfig with a cluster, a user and a context per entry, all named by its key."""
    doc: dict[str, Any] = {"apiVersion": "v1", "kind": "Config", "clusters": [], "users": []}
    doc["contexts"] = []
    for name, (cluster, user) in entries.items():
        doc["clusters"].append({"name": name, "cluster": cluster})
        doc["users"].append({"name": name, "user": user})
        doc["contexts"].append({"name": name, "context": {"cluster": name, "user": name}})
    doc["current-context"] = current
    doc["preferences"] = {}
    return yaml.safe_dump(doc, sort_keys=False)


def merged_kubeconfig(clusters: Mapping[str, ContextAccess], current: str | None = None) -> str:
    """One kubeconfig, a context per entry named by its key, everything embedded."""
    entries = {name: _entries(access) for name, access in clusters.items()}
    return _document(entries, current or next(iter(clusters), ""))


def single_context_kubeconfig(name: str, access: ContextAccess) -> str:
    """``access`` as a self-contained kubeconfig whose only (current) context is ``name``."""
    return merged_kubeconfig({name: access}, current=name)


def render_kubeconfig(
    name: str,
    server: str,
    *,
    ca_file: Path,
    client_cert_file: Path,
    client_key_file: Path,
    embed: bool = False,
) -> str:
    """A cluster's admin kubeconfig referring to certificate files (what the harness loads
    itself: loading embedded data makes kubernetes_asyncio write temporary files that live
    until exit), or (``embed``) self-contained, for another process or a Secret."""
    if embed:
        ca, cert, key = (p.read_bytes() for p in (ca_file, client_cert_file, client_key_file))
        return single_context_kubeconfig(name, ContextAccess(name, server, ca, cert, key))
    cluster = {"server": server, "certificate-authority": str(ca_file)}
    user = {"client-certificate": str(client_cert_file), "client-key": str(client_key_file)}
    return _document({name: (cluster, user)}, name)
