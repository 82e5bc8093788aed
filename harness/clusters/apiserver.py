"""One kube-apiserver on loopback: a "cluster" without nodes or controllers.

Each API server gets its own certificates, its own service-account keys and its own
``--etcd-prefix /<name>`` in the shared etcd, so several of them form independent clusters
(objects, RBAC and credentials of one are invisible to the others). Everything it writes —
certificates, keys, kubeconfigs — lives in a temporary directory it creates and deletes.

It is ready when ``/readyz`` answers ``ok`` to the admin user *and* namespace ``default``
exists (created by a post-start hook slightly after ``/readyz`` can pass), which is the
first moment a test can create namespaced objects.
"""

from __future__ import annotations

import os
import random
import shutil
import ssl
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from harness.clusters import ports
from harness.clusters.certs import create_ca, issue, service_account_key_pair
from harness.clusters.contexts import render_kubeconfig
from harness.clusters.incarnations import Incarnations
from harness.clusters.probes import http_get
from harness.clusters.process import NotReady, Probe, ProcessRecord
from harness.errors import ClusterError


def loopback_service_range(rng: random.Random | None = None) -> str:
    """A random ``/24`` of 127.0.0.0/8 for ``--service-cluster-ip-range``, off 127.0.0.0/16.

    kube-apiserver calls a webhook's ``clientConfig.service`` at the Service's ClusterIP
    (``--enable-aggregator-routing`` would dial an EndpointSlice address instead, and a
    slice may not hold a loopback one): on loopback ClusterIPs the harness's kube-proxy
    (:mod:`harness.platform.kubelet`) can serve them without touching this host's network.
    Random, so that clusters on one host hardly ever share ClusterIPs."""
    chooser = rng or random.SystemRandom()
    return f"127.{chooser.randint(64, 254)}.{chooser.randint(0, 255)}.0/24"


@dataclass(frozen=True)
class ApiServerFiles:
    """Credentials and configuration of one cluster's admin user, as files."""

    ca_file: Path  # verifies the API server's serving certificate
    client_cert_file: Path  # admin user: O=system:masters
    client_key_file: Path
    kubeconfig: Path  # refers to the three files above

    def ssl_context(self) -> ssl.SSLContext:
        """A client TLS context that trusts the API server and presents the admin cert."""
        ctx = ssl.create_default_context(cafile=str(self.ca_file))
        ctx.load_cert_chain(str(self.client_cert_file), str(self.client_key_file))
        return ctx


SERVED_APIS: tuple[str, ...] = (
    "v1",
    "apps/v1",
    "admissionregistration.k8s.io/v1",
    "apiextensions.k8s.io/v1",
    "apiregistration.k8s.io/v1",
    "authentication.k8s.io/v1",
    "authorization.k8s.io/v1",
    "coordination.k8s.io/v1",
    "discovery.k8s.io/v1",
    "events.k8s.io/v1",
    "networking.k8s.io/v1",
    "rbac.authorization.k8s.io/v1",
    "scheduling.k8s.io/v1",
)
"""The API group versions a cluster serves by default: what Kyma's components and KLM use
(core, apps, RBAC, webhooks, CRDs, leases, events, network policies) and what
kube-apiserver itself needs (networking: Service IPs; scheduling: its priority classes).
Each group left out (batch, policy, autoscaling, certificates, resource, storage, node,
flowcontrol, ...) is storage and bootstrap work kube-apiserver skips at start: measured on
2 cores, 1.8 → 0.87 s of CPU per API server until ready."""

ADMISSION_PLUGINS_READING: Mapping[str, tuple[str, ...]] = {
    "node.k8s.io/v1": ("RuntimeClass",),
    "storage.k8s.io/v1": (
        "DefaultStorageClass",
        "PersistentVolumeClaimResize",
        "StorageObjectInUseProtection",
    ),
}
"""Default admission plugins that watch an API group: off when the group is not served."""


@dataclass(frozen=True)
class ApiServerOptions:
    """Knobs that trade API-server features for CPU and memory on small machines.

    ``served_apis``: see :data:`SERVED_APIS`; ``None`` serves kube-apiserver's own
    defaults. ``gc_percent`` is the Go runtime's ``GOGC``: the start-up builds a heap of
    ~100 MiB from nothing, and at Go's default of 100 the collector runs over and over on
    the way (400: ~25 % less CPU until ready, measured; RSS stays ~1/4 GiB per server).
    """

    watch_cache: bool = True
    priority_and_fairness: bool = False  # its idle bookkeeping costs CPU we share
    served_apis: tuple[str, ...] | None = SERVED_APIS
    gc_percent: int | None = 400
    extra_args: tuple[str, ...] = ()

    def disabled_admission_plugins(self) -> str:
        """``ServiceAccount`` (no token controller runs) and the plugins whose API group
        is not served."""
        served = set(self.served_apis) if self.served_apis is not None else None
        off = ["ServiceAccount"]
        for api, plugins in ADMISSION_PLUGINS_READING.items():
            if served is not None and api not in served:
                off.extend(plugins)
        return f"--disable-admission-plugins={','.join(off)}"

    def runtime_config(self) -> list[str]:
        """The ``--runtime-config`` flag that serves exactly :attr:`served_apis`."""
        if self.served_apis is None:
            return []
        enabled = ",".join(f"{api}=true" for api in self.served_apis)
        return [f"--runtime-config=api/all=false,{enabled}"]

    def environ(self) -> dict[str, str] | None:
        """The API server's environment (this process's, with ``GOGC``), or None: inherit."""
        if self.gc_percent is None:
            return None
        return {**os.environ, "GOGC": str(self.gc_percent)}


def _write_certificates(name: str, certs_dir: Path) -> dict[str, Path]:
    """Generate this cluster's CAs, leaf certificates and service-account keys."""
    paths = {
        key: certs_dir / file
        for key, file in {
            "serving_ca": "serving-ca.crt",
            "serving_cert": "apiserver.crt",
            "serving_key": "apiserver.key",
            "client_ca": "client-ca.crt",
            "admin_cert": "admin.crt",
            "admin_key": "admin.key",
            "sa_pub": "service-account.pub",
            "sa_key": "service-account.key",
        }.items()
    }
    serving_ca = create_ca(f"{name}-serving-ca")
    paths["serving_ca"].write_bytes(serving_ca.cert_pem)
    issue(
        serving_ca,
        "kube-apiserver",
        dns_names=["localhost", "kubernetes", "kubernetes.default"],
        ip_addresses=[ports.LOOPBACK],
        server=True,
    ).write(paths["serving_cert"], paths["serving_key"])
    client_ca = create_ca(f"{name}-client-ca")
    paths["client_ca"].write_bytes(client_ca.cert_pem)
    issue(client_ca, "admin", organizations=["system:masters"], client=True).write(
        paths["admin_cert"], paths["admin_key"]
    )
    service_account_key_pair().write(paths["sa_pub"], paths["sa_key"])
    return paths


@dataclass(eq=False)
class KubeApiServer(Incarnations):
    """A kube-apiserver for cluster ``name`` backed by ``etcd_url``; use as ``async with``."""

    error = ClusterError
    binary: Path
    _: KW_ONLY
    name: str
    etcd_url: str
    log_path: Path
    ready_timeout: float = 60.0
    options: ApiServerOptions = ApiServerOptions()
    stop_timeout: float = 5.0
    """Seconds from SIGTERM to SIGKILL. With watches open, the API server does not exit on
    SIGTERM by itself (measured: still running after 10 s); etcd holds the state, so a
    SIGKILL after a short grace loses nothing."""
    crds: Sequence[Mapping[str, Any]] = field(default=(), repr=False)
    """Created as soon as the server answers, while its post-start hooks still run (~1 s):
    kube-apiserver holds every create of a CRD's objects for 2 s after the CRD is
    Established (:func:`harness.kube.crds.wait_creatable`), and those seconds pass
    meanwhile."""
    workdir: Path | None = field(default=None, init=False)
    files: ApiServerFiles | None = field(default=None, init=False)
    records: list[ProcessRecord] = field(default_factory=list, init=False)
    """One record per incarnation (restarts included), oldest first."""
    service_cluster_ip_range: str = field(default_factory=loopback_service_range, init=False)
    """ClusterIPs come from here (kept across restarts; see loopback_service_range)."""
    _certs: dict[str, Path] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        self.crds = tuple(self.crds)

    @property
    def port(self) -> int:
        return self._ports[0] if self._ports else 0

    @property
    def url(self) -> str:
        return f"https://{ports.LOOPBACK}:{self.port}" if self._ports else ""

    def argv(self, port: int) -> list[str]:
        c = self._certs
        args = [
            str(self.binary),
            f"--etcd-servers={self.etcd_url}",
            f"--etcd-prefix=/{self.name}",
            f"--bind-address={ports.LOOPBACK}",
            f"--advertise-address={ports.LOOPBACK}",
            f"--secure-port={port}",
            f"--tls-cert-file={c['serving_cert']}",
            f"--tls-private-key-file={c['serving_key']}",
            f"--client-ca-file={c['client_ca']}",
            "--authorization-mode=RBAC",
            f"--service-account-issuer=https://{ports.LOOPBACK}:{port}",
            f"--service-account-key-file={c['sa_pub']}",
            f"--service-account-signing-key-file={c['sa_key']}",
            f"--service-cluster-ip-range={self.service_cluster_ip_range}",
            self.options.disabled_admission_plugins(),
            "--allow-privileged=true",
            f"--cert-dir={self._require_workdir() / 'cert-dir'}",  # never /var/run/kubernetes
            f"--watch-cache={str(self.options.watch_cache).lower()}",
            f"--enable-priority-and-fairness={str(self.options.priority_and_fairness).lower()}",
            "--profiling=false",
            *self.options.runtime_config(),
        ]
        return args + list(self.options.extra_args)

    def _require_workdir(self) -> Path:
        assert self.workdir is not None, "workdir is created on start"
        return self.workdir

    async def start(self) -> None:
        """First call: work directory and certificates, then the server on a free port
        (picked again if taken). Later calls, after :meth:`stop` or :meth:`kill`: the
        same server again — same port, certificates and etcd prefix, so clients and
        kubeconfigs stay valid. Returns once it is ready (``/readyz`` ok and namespace
        ``default`` readable)."""
        if self.workdir is None:
            workdir = Path(tempfile.mkdtemp(prefix=f"watcher-harness-{self.name}-"))
            self.stack.callback(shutil.rmtree, workdir, ignore_errors=True)
            self.workdir = workdir
            (workdir / "certs").mkdir()
            self._certs = _write_certificates(self.name, workdir / "certs")
            self.files = ApiServerFiles(
                ca_file=self._certs["serving_ca"],
                client_cert_file=self._certs["admin_cert"],
                client_key_file=self._certs["admin_key"],
                kubeconfig=workdir / "kubeconfig",
            )
        first = not self._ports
        await super().start()
        if first:
            assert self.files is not None
            self.files.kubeconfig.write_text(self.kubeconfig_text(embed=False))

    def _fresh_ports(self) -> tuple[int]:
        return (ports.free_port(),)

    async def _run(self) -> None:
        assert self.files is not None and self._session is not None
        crds = () if self.records else self.crds  # a restart finds them in etcd
        probe = _ready_probe(self._session, self.url, self.files.ssl_context(), crds=crds)
        argv, env = self.argv(self.port), self.options.environ()
        process = self._incarnation(argv, probe, env, name=f"kube-apiserver[{self.name}]")
        self.records.append(process.record)
        await process.start()  # stops the process again if it never gets ready

    # -- fault injection: the same server goes away and comes back --------------------

    async def close(self) -> None:
        """Teardown: kill the current incarnation (reported as SIGKILL, exit -9), then
        delete the files — not :meth:`stop` first.

        The cluster goes with its etcd prefix and certificates, so nothing needs the API
        server's graceful shutdown: after SIGTERM it stops listening within ~20 ms, then
        waits 1.1 s for net/http's HTTP/2 shutdown (1 s for peers to answer GOAWAY) before
        exiting; every environment paid that at its end. :meth:`stop` (fault scenarios)
        still shuts down gracefully."""
        try:
            await self.kill()
        finally:
            await self._unwind()

    def kubeconfig_text(self, *, embed: bool, name: str | None = None) -> str:
        """Admin kubeconfig: certificate file paths, or (``embed``) self-contained data;
        its cluster and context are called ``name`` (default: this server's)."""
        assert self.files is not None and self.url, "the API server has not been started"
        return render_kubeconfig(
            name or self.name,
            self.url,
            ca_file=self.files.ca_file,
            client_cert_file=self.files.client_cert_file,
            client_key_file=self.files.client_key_file,
            embed=embed,
        )


CRDS_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


def _ready_probe(
    session: aiohttp.ClientSession,
    url: str,
    ssl_context: ssl.SSLContext,
    *,
    crds: Sequence[Mapping[str, Any]] = (),
) -> Probe:
    """Ready = ``crds`` created (each as soon as the server takes it), ``/readyz`` says ok
    and namespace ``default`` exists."""
    pending = list(crds)

    async def probe() -> bool:
        while pending:
            status, body = await http_get(
                session, f"{url}{CRDS_PATH}", ssl_context=ssl_context, post=pending[0]
            )
            if status not in (201, 409):  # 409: there from an earlier start (same etcd)
                raise NotReady(f"CRD {pending[0]['metadata']['name']}: {status} {body[-200:]!r}")
            pending.pop(0)
        status, body = await http_get(session, f"{url}/readyz", ssl_context=ssl_context)
        if status != 200 or body.strip() != "ok":
            raise NotReady(f"/readyz: {status} {body.strip()[-300:]!r}")
        status, body = await http_get(
            session, f"{url}/api/v1/namespaces/default", ssl_context=ssl_context
        )
        if status != 200:
            raise NotReady(f"namespace default: {status}")
        return True

    return probe
