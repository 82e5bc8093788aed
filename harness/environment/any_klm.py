"""Any Lifecycle Manager in the loop: a KLM build as a process, the harness as its cluster.

With a KLM command (``--klm-command``), the harness stops being the Lifecycle Manager and
plays only what a KCP and its SKRs provide (clusters and CRDs, cert-manager and KLM's
deployment config, Istio's ingress and the KLM pod's sidecar, a kubelet per SKR), so
upstream's Go KLM runs as in a landscape; docs/any-klm.md lists each part and its limits.
Everything unwinds in reverse, also when a step fails.
"""

from __future__ import annotations

import asyncio
import logging
import tempfile
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes_asyncio.client import ApiClient

from harness.clusters import ports
from harness.environment.compose import open_clusters
from harness.environment.events import EventLog
from harness.environment.klm_platform import (
    CA_CERTIFICATE,
    watcher_ca_chain,
    watcher_gateway,
)
from harness.environment.parts import EnvironmentParts
from harness.environment.provisioning import provision, wait_kymas_ready
from harness.environment.spec import KLM_SERVICE, EnvironmentSpec
from harness.environment.startup import istio_control_plane
from harness.errors import HarnessError
from harness.kcp.gateway.envoy import EnvoyGateway
from harness.kcp.klm_process import KlmFlags, KlmProcess
from harness.kcp.lifecycle_manager.manager import COMPONENT as KLM_COMPONENT
from harness.kcp.sidecar import ListenerSidecar
from harness.kcp.tls_secret import SecretLayoutError, tls_data
from harness.kube import (
    CERTIFICATES,
    GATEWAYS,
    ISSUERS,
    SECRETS,
    WATCHERS,
    create_or_replace,
    ensure_namespace,
    get,
)
from harness.kube.crds import apply_crds
from harness.platform.cert_manager import CertManager
from harness.platform.kubelet import Kubelet
from harness.skr.webhook import webhook_executable
from watcher import pki
from watcher.domain import (
    GATEWAY_SECRET_NAME,
    ISTIO_NAMESPACE,
    KCP_NAMESPACE,
)
from watcher.render.envoy import TlsFiles

logger = logging.getLogger("harness.environment.any_klm")

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "crds"
OUR_KLM_CRDS = tuple(FIXTURES / f"{n}.yaml" for n in ("kyma", "watcher", "catalog", "manifest"))
PLATFORM_CRDS = (FIXTURES / "istio.yaml", FIXTURES.parent / "platform" / "cert-manager.yaml")
"""Istio's (as the in-process KLM's KCP has) and cert-manager's: never in the rendered KCP
manifests (``fixtures/platform``: schemaless, they would replace a real cert-manager's)."""
WEBHOOK_IMAGES = ("runtime-watcher", "skr-webhook", "watcher-webhook")
"""Image repositories (last path segment) the kubelet runs as the SKR webhook."""
INSTANCE_ID_LABEL = "kyma-project.io/instance-id"


def klm_crd_files(folder: Path | None) -> tuple[Path, ...]:
    """The KLM's CRDs: every YAML file of ``folder``, else the harness's own."""
    if folder is None:
        return OUR_KLM_CRDS
    files = tuple(sorted(p for p in folder.iterdir() if p.suffix in (".yaml", ".yml")))
    if not files:
        raise HarnessError(f"KLM CRDs: no .yaml files in {folder}")
    return files


def webhook_commands(command: Sequence[str]) -> Callable[[str], Sequence[str] | None]:
    """Image → what the kubelet runs: the SKR webhook's images run ``command`` (a
    bring-your-own webhook) or ours; other images have no host command."""
    argv = tuple(command) or (webhook_executable(),)

    def for_image(image: str) -> Sequence[str] | None:
        repository = image.rsplit("@", 1)[0]
        last = repository.rsplit("/", 1)[-1].split(":", 1)[0]
        return argv if last in WEBHOOK_IMAGES else None

    return for_image


@dataclass(kw_only=True)
class KlmEnvironment(EnvironmentParts):
    """Handles to every part of an environment around a KLM process; its :attr:`listeners`
    are the other managers' (the scenario's ``listeners``)."""

    klm: KlmProcess
    cert_manager: CertManager
    kubelets: dict[str, Kubelet]
    sidecar: ListenerSidecar
    """Between the gateway and the KLM's listener: the events it accepted, on the wire."""
    timings: dict[str, float] = field(default_factory=dict)
    """Seconds each start-up phase took (for the report and the README)."""

    def kyma_key(self, skr: str) -> str:
        for s in self.spec.skrs:
            if s.name == skr:
                return f"{KCP_NAMESPACE}/{s.kyma_name}"
        raise KeyError(f"no SKR {skr!r}")


async def _wait_secret(api: ApiClient, namespace: str, name: str, within: float) -> dict[str, Any]:
    async with asyncio.timeout(within):
        while True:
            secret = await get(api, SECRETS, name, namespace)
            if secret is not None:
                try:
                    tls_data(secret)
                except SecretLayoutError:
                    pass
                else:
                    return secret
            await asyncio.sleep(0.1)


async def _provision(env: KlmEnvironment) -> list[str]:
    """The Watchers, then what provisioning writes (catalog, access Secrets, KCP Kymas
    with the instance id provisioning also labels them with); the Kymas written."""
    for obj in env.spec.all_watchers:
        await ensure_namespace(env.kcp_api, obj["metadata"]["namespace"])
        await create_or_replace(env.kcp_api, WATCHERS, dict(obj))
    return await provision(
        env.kcp_api, env.spec, env.clusters, extra_labels={INSTANCE_ID_LABEL: "{runtime_id}"}
    )


@asynccontextmanager
async def klm_environment(
    spec: EnvironmentSpec,
    *,
    ready_within: float = 120.0,
    on_running: Callable[[KlmEnvironment], None] | None = None,
) -> AsyncIterator[KlmEnvironment]:
    """Bring up the clusters, the platform and the KLM process of ``spec.backend``.

    ``on_running`` is called once every part runs, just before provisioning writes the
    Kymas — where a benchmark starts watching the way to Ready."""
    choice = spec.backend
    if not choice.klm_command:
        raise HarnessError("klm_environment needs a KLM command (--klm-command)")
    loop = asyncio.get_running_loop()
    timings: dict[str, float] = {}
    started = loop.time()

    def phase(name: str) -> None:
        timings[name] = round(loop.time() - started - sum(timings.values()), 3)

    async with AsyncExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="klm-env-")))
        log_dir = spec.log_dir or workdir / "logs"
        log_dir.mkdir(parents=True, exist_ok=True)
        _, clusters, kcp_api, skr_apis = await open_clusters(stack, spec)
        phase("clusters")
        await apply_crds(kcp_api, [*klm_crd_files(choice.klm_crds), *PLATFORM_CRDS])
        for namespace in (KCP_NAMESPACE, ISTIO_NAMESPACE):
            await ensure_namespace(kcp_api, namespace)
        cert_manager = await stack.enter_async_context(CertManager(kcp_api))
        host = ports.LOOPBACK
        gateway_port = ports.free_port()
        await create_or_replace(kcp_api, GATEWAYS, watcher_gateway(host, gateway_port))
        for obj in watcher_ca_chain(host):
            resource = CERTIFICATES if obj["kind"] == "Certificate" else ISSUERS
            await create_or_replace(kcp_api, resource, obj)
        await cert_manager.wait_issued(ISTIO_NAMESPACE, CA_CERTIFICATE, within=60)
        phase("platform")

        klm = await stack.enter_async_context(
            KlmProcess(
                choice.klm_command,
                kubeconfig=clusters["kcp"].kubeconfig,
                log_path=log_dir / "lifecycle-manager.log",
                flags=KlmFlags(intervals=spec.intervals, workers=spec.klm_workers),
            )
        )
        phase("klm")

        try:
            secret = await _wait_secret(kcp_api, ISTIO_NAMESPACE, GATEWAY_SECRET_NAME, 60)
        except TimeoutError:
            raise HarnessError(
                f"the KLM wrote no gateway Secret {ISTIO_NAMESPACE}/{GATEWAY_SECRET_NAME} "
                f"within 60 s; its log ends:\n{klm.log_tail()}"
            ) from None
        served = tls_data(secret)
        (workdir / "gateway").mkdir()
        files = pki.write_secret_files(workdir / "gateway", served)
        gateway = await stack.enter_async_context(
            EnvoyGateway(
                TlsFiles(str(files["tls.crt"]), str(files["tls.key"]), str(files["ca.crt"])),
                port=gateway_port,
                log_dir=spec.log_dir,
            )
        )
        istio, _, sync, registry = istio_control_plane(kcp_api, gateway, served)
        await stack.enter_async_context(istio)
        sidecar = await stack.enter_async_context(ListenerSidecar(klm.listener_port))
        log = EventLog()
        sidecar.on_accepted.append(log.recorder(KLM_COMPONENT))
        registry.register(*KLM_SERVICE, (ports.LOOPBACK, sidecar.port))
        phase("gateway")

        commands = webhook_commands(choice.webhook_command)
        kubelets = {
            s.name: await stack.enter_async_context(
                Kubelet(
                    skr_apis[s.name],
                    cluster=s.name,
                    workdir=workdir / "kubelet" / s.name,
                    commands=commands,
                    log_dir=log_dir,
                )
            )
            for s in spec.skrs
        }
        env = KlmEnvironment(
            spec=spec,
            clusters=clusters,
            kcp_api=kcp_api,
            skr_apis=skr_apis,
            klm=klm,
            cert_manager=cert_manager,
            gateway=gateway,
            registry=registry,
            sync=sync,
            kubelets=kubelets,
            sidecar=sidecar,
            log=log,
            workdir=workdir,
            stack=stack,
            timings=timings,
        )
        for listener in spec.listeners:
            await env.add_listener(listener.component, listener.service, listener.implementation)
        if on_running is not None:
            on_running(env)
        await wait_kymas_ready(kcp_api, await _provision(env), ready_within)
        phase("kymas-ready")
        yield env


__all__ = ["KlmEnvironment", "klm_environment", "webhook_commands"]
