"""The ``kubeconfig`` backend: clusters that exist already, known only by kubeconfig contexts.

The harness logs in to them exactly as to a ``local`` cluster: through a self-contained
copy of each context (certificates as files, in a temporary directory), never the user's
file. They existed before and stay after, so what the run created is noted and removed
(:mod:`harness.clusters.ownership`), also after a failure.

No process is owned: :attr:`Cluster.control` is None, so faults that stop or kill an API
server are refused naming this backend. The SKR API servers call the host-run webhook,
so they must reach this host's address (``WATCHER_HARNESS_HOST_ADDRESS``) — or the
webhook runs in-cluster (``WATCHER_HARNESS_WEBHOOK_MODE=in-cluster``).
"""

from __future__ import annotations

import asyncio
import secrets
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

from harness.aio import gather_all
from harness.clusters.contexts import (
    ContextAccess,
    KubeconfigError,
    find_context,
    render_kubeconfig,
    single_context_kubeconfig,
)
from harness.clusters.ownership import Ownership
from harness.clusters.plane import Cluster, Environment, validate_cluster_names
from harness.clusters.selection import ClusterTarget
from harness.errors import ClusterError
from harness.kube import KubeError, request


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2)


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    path.chmod(0o600)
    return path


def cluster_from_access(name: str, access: ContextAccess, directory: Path) -> Cluster:
    """A :class:`Cluster` for ``access``; certificate files and kubeconfigs in ``directory``.

    With a token instead of a client certificate the kubeconfig carries the token and
    the certificate fields are None.
    """
    directory.mkdir(parents=True, exist_ok=True)
    ca = _write(directory / "ca.crt", access.ca_pem) if access.ca_pem else None
    cert = key = None
    if access.client_cert_pem is not None and access.client_key_pem is not None:
        cert = _write(directory / "client.crt", access.client_cert_pem)
        key = _write(directory / "client.key", access.client_key_pem)
    if ca is not None and cert is not None and key is not None and not access.token:
        text = render_kubeconfig(
            name, access.server, ca_file=ca, client_cert_file=cert, client_key_file=key
        )
    else:  # token, system trust or insecure: the embedded form says it all
        text = single_context_kubeconfig(name, access)
    kubeconfig = directory / "kubeconfig"
    kubeconfig.write_text(text, encoding="utf-8")
    kubeconfig.chmod(0o600)
    return Cluster(
        name=name,
        server=access.server,
        kubeconfig=kubeconfig,
        ca_file=ca,
        client_cert_file=cert,
        client_key_file=key,
        process=None,
        kubeconfig_embedded=single_context_kubeconfig(name, access),
        control=None,
    )


class KubeconfigBackend:
    """Existing clusters by kubeconfig context; cleans up after itself (see module doc)."""

    name = "kubeconfig"

    def __init__(
        self,
        targets: Mapping[str, ClusterTarget] | Callable[[str], ClusterTarget],
        *,
        run_id: str | None = None,
        namespaces: Mapping[str, Sequence[str]] | None = None,
        reach_timeout: float = 15.0,
        cleanup_timeout: float = 60.0,
    ) -> None:
        """``targets``: cluster name → files and context (a mapping, or a function such as
        :meth:`BackendChoice.target`). ``namespaces``: cluster name → namespaces the
        harness installs into (created and labelled if missing, then deleted)."""
        self.targets = targets
        self.run_id = run_id or new_run_id()
        self.namespaces = {k: tuple(v) for k, v in (namespaces or {}).items()}
        self.reach_timeout = reach_timeout
        self.cleanup_timeout = cleanup_timeout
        self.ownerships: dict[str, Ownership] = {}

    def _access(self, name: str) -> ContextAccess:
        if callable(self.targets):
            target = self.targets(name)
        elif name in self.targets:
            target = self.targets[name]
        else:
            raise ClusterError(
                f"kubeconfig backend: no context for cluster {name!r}; "
                f"have {sorted(self.targets)} (WATCHER_HARNESS_CONTEXTS=NAME=CONTEXT,...)"
            )
        return find_context(target.kubeconfigs, target.context)

    async def _reach(self, cluster: Cluster) -> None:
        try:
            async with asyncio.timeout(self.reach_timeout), cluster.api_client() as api:
                await request(api, "GET", "/version")
        except (KubeError, TimeoutError, OSError) as exc:
            raise ClusterError(
                f"kubeconfig backend: cluster {cluster.name} ({cluster.server}) does not "
                f"answer: {exc or type(exc).__name__}"
            ) from None

    async def _clean_up(self) -> None:
        """Every cluster at once; all of them are tried even if one fails."""
        ownerships, self.ownerships = self.ownerships, {}
        await gather_all(
            (o.end() for o in ownerships.values()),
            lambda errors: ClusterError("; ".join(str(e) for e in errors)),
        )

    @asynccontextmanager
    async def start(self, names: Sequence[str]) -> AsyncIterator[Environment]:
        names = validate_cluster_names(names)
        started = time.monotonic()
        try:
            accesses = {name: self._access(name) for name in names}
        except KubeconfigError as exc:
            raise ClusterError(f"kubeconfig backend: {exc}") from None
        async with AsyncExitStack() as stack:
            workdir = Path(tempfile.mkdtemp(prefix="watcher-kubeconfig-"))
            stack.callback(shutil.rmtree, workdir, ignore_errors=True)
            clusters = {
                name: cluster_from_access(name, access, workdir / name)
                for name, access in accesses.items()
            }
            await asyncio.gather(*(self._reach(c) for c in clusters.values()))
            apis = {
                name: await stack.enter_async_context(c.api_client())
                for name, c in clusters.items()
            }
            stack.push_async_callback(self._clean_up)  # only clusters whose begin() ran
            for name, api in apis.items():
                ownership = Ownership(api, name, self.run_id, timeout=self.cleanup_timeout)
                await ownership.begin()
                self.ownerships[name] = ownership
            for name, ownership in self.ownerships.items():
                await ownership.claim_namespaces(self.namespaces.get(name, ()))
            yield Environment(
                backend=self.name,
                clusters=clusters,
                processes=(),
                startup_seconds=time.monotonic() - started,
                temp_dirs=(workdir,),
            )
