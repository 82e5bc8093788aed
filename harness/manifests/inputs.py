"""What a user has → the parameters of the pure manifest renderers.

A watchers file (multi-document YAML of Watcher CRs, or a ``List``), the CRDs the harness
ships in ``fixtures/crds``, and the PKI: either a directory written by
``python -m watcher certs`` (checked: the runtime certificate must carry the runtime id
as CN and the skr-domain as SAN, the gateway certificate must name the KCP host SKRs
dial), or a fresh CA with both certificates. One CA signs everything, so the SKR and KCP
sets rendered together always trust each other.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from cryptography import x509

from harness.errors import HarnessError
from watcher import pki
from watcher.domain import KCP_NAMESPACE
from watcher.listener.certs import subject_alt_names
from watcher.model import Contract
from watcher.render.kcp_manifests import GATEWAY_NAME, KcpManifestParams, Runtime
from watcher.render.skr_manifests import NetworkPolicyMode, SkrManifestParams, kcp_port
from watcher.render.watcher_cr import klm_watcher_dict

CRD_DIR = Path(__file__).resolve().parents[2] / "fixtures" / "crds"
CERT_FILES = ("ca.crt", "skr.crt", "skr.key", "kcp.crt", "kcp.key")
"""The layout ``python -m watcher certs DIR`` writes."""
DEFAULT_RUNTIME_ID = "runtime-a"
DEFAULT_SKR_DOMAIN = "skr-a.kyma.example.com"


class ManifestInputError(HarnessError, ValueError):
    """An input file or option cannot be used; the message names it and says why."""


@dataclass(frozen=True)
class Pki:
    """PEM material for one KCP and one SKR, signed by one CA."""

    ca_pem: bytes
    skr_cert: bytes
    skr_key: bytes
    kcp_cert: bytes
    kcp_key: bytes
    generated: bool = False

    def skr_tls(self) -> dict[str, bytes]:
        """The webhook's Secret data: runtime certificate, its key, the KCP CA bundle."""
        return {"tls.crt": self.skr_cert, "tls.key": self.skr_key, "ca.crt": self.ca_pem}

    def gateway_tls(self) -> dict[str, bytes]:
        """The gateway's Secret data: serving certificate, key, the CA of client certs."""
        return {"tls.crt": self.kcp_cert, "tls.key": self.kcp_key, "ca.crt": self.ca_pem}

    def files(self) -> dict[str, bytes]:
        """File name → content, in ``python -m watcher certs`` layout."""
        values = (self.ca_pem, self.skr_cert, self.skr_key, self.kcp_cert, self.kcp_key)
        return dict(zip(CERT_FILES, values, strict=True))


@dataclass(frozen=True)
class ManifestInputs:
    skr: SkrManifestParams
    kcp: KcpManifestParams
    pki: Pki


def _host(kcp_addr: str) -> str:
    kcp_port(kcp_addr)  # a clear error for anything but <host>:<port>
    return kcp_addr.rpartition(":")[0].strip("[]")


def gateway_names(kcp_host: str, namespace: str = KCP_NAMESPACE) -> tuple[list[str], list[str]]:
    """(DNS names, IPs) the gateway certificate needs: the host SKRs dial and the
    gateway Service's in-cluster names."""
    dns = [f"{GATEWAY_NAME}.{namespace}.svc", f"{GATEWAY_NAME}.{namespace}.svc.cluster.local"]
    ips: list[str] = []
    if pki.is_ip(kcp_host):
        ips.append(kcp_host)
    else:
        dns.insert(0, kcp_host)
    return dns, ips


def generate_pki(runtime_id: str, skr_domain: str, kcp_host: str) -> Pki:
    """A fresh CA, the runtime certificate (CN = runtime id, SANs = skr-domain + webhook
    Service names) and the gateway's serving certificate for ``kcp_host``."""
    ca = pki.create_ca()
    skr = pki.issue_runtime_certificate(ca, runtime_id, skr_domain)
    dns, ips = gateway_names(kcp_host)
    kcp = pki.issue_server_certificate(ca, "kcp-gateway", dns_names=dns, ip_addresses=ips)
    return Pki(ca.cert_pem, skr.cert_pem, skr.key_pem, kcp.cert_pem, kcp.key_pem, generated=True)


def _certificate(pem: bytes, where: Path) -> x509.Certificate:
    try:
        return x509.load_pem_x509_certificate(pem)
    except ValueError as exc:
        raise ManifestInputError(f"{where}: not a PEM certificate ({exc})") from None


def _sans(cert: x509.Certificate) -> set[str]:
    names = subject_alt_names(cert)
    return {*names.dns, *names.ips}


def _skr_domain(cert: x509.Certificate) -> str:
    """The runtime certificate's skr-domain: its first DNS SAN that is no Service name."""
    others = (*pki.WEBHOOK_SERVICE_SANS, "localhost")
    return next((n for n in subject_alt_names(cert).dns if n not in others), "")


def load_pki(directory: Path) -> Pki:
    """The files of ``python -m watcher certs DIR``; a missing or unreadable one is named."""
    if not directory.is_dir():
        raise ManifestInputError(
            f"--certs {directory}: no such directory; create one with "
            f"`python -m watcher certs {directory} --runtime-id ID --skr-domain DOMAIN`"
        )
    data: dict[str, bytes] = {}
    for name in CERT_FILES:
        path = directory / name
        try:
            data[name] = path.read_bytes()
        except OSError as exc:
            raise ManifestInputError(
                f"--certs {directory}: cannot read {name} ({exc.strerror or exc}); the "
                f"directory needs {', '.join(CERT_FILES)} as `python -m watcher certs` writes"
            ) from None
    for name in ("ca.crt", "skr.crt", "kcp.crt"):
        _certificate(data[name], directory / name)
    return Pki(data["ca.crt"], data["skr.crt"], data["skr.key"], data["kcp.crt"], data["kcp.key"])


def check_pki(
    material: Pki, *, runtime_id: str, skr_domain: str, kcp_host: str, where: str
) -> None:
    """The certificates fit the options: a mismatch would only show later as a refused
    event (wrong CN or SAN at the listener) or a failed TLS handshake at the gateway."""
    skr = _certificate(material.skr_cert, Path(where) / "skr.crt")
    kcp = _certificate(material.kcp_cert, Path(where) / "kcp.crt")
    problems = []
    if pki.name_cn(skr.subject) != runtime_id:
        problems.append(
            f"skr.crt has CN {pki.name_cn(skr.subject)!r} but the runtime id is {runtime_id!r}"
        )
    if skr_domain not in _sans(skr):
        problems.append(f"skr.crt does not carry the skr-domain {skr_domain!r} as a SAN")
    missing = [n for n in pki.WEBHOOK_SERVICE_SANS if n not in _sans(skr)]
    if missing:
        problems.append(f"skr.crt lacks the webhook Service name(s) {', '.join(missing)}")
    if kcp_host not in _sans(kcp):
        problems.append(
            f"kcp.crt does not name the KCP host {kcp_host!r} (SANs: "
            f"{', '.join(sorted(_sans(kcp))) or 'none'}); SKR webhooks would fail the handshake"
        )
    if problems:
        raise ManifestInputError(f"{where}: " + "; ".join(problems))


def load_watchers(path: Path | None) -> list[dict[str, Any]]:
    """Watcher CR dicts from a multi-document YAML file (a ``List`` too); ``None``: KLM's
    default Watcher. Validation of the CRs themselves happens when they are rendered."""
    if path is None:
        return [klm_watcher_dict()]
    try:
        with open(path, encoding="utf-8") as stream:
            docs = [d for d in yaml.safe_load_all(stream) if d is not None]
    except OSError as exc:
        raise ManifestInputError(f"--watchers {path}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise ManifestInputError(f"--watchers {path}: not valid YAML: {exc}") from None
    watchers: list[dict[str, Any]] = []
    for index, doc in enumerate(docs):
        items = doc.get("items") if isinstance(doc, Mapping) else None
        if isinstance(doc, Mapping) and str(doc.get("kind", "")).endswith("List"):
            if not isinstance(items, list):
                raise ManifestInputError(f"--watchers {path}: document {index + 1} has no items")
            candidates = items
        else:
            candidates = [doc]
        for obj in candidates:
            if not isinstance(obj, Mapping) or obj.get("kind") != "Watcher":
                kind = obj.get("kind") if isinstance(obj, Mapping) else type(obj).__name__
                raise ManifestInputError(
                    f"--watchers {path}: document {index + 1} is a {kind!r}, expected Watcher"
                )
            watchers.append(dict(obj))
    if not watchers:
        raise ManifestInputError(f"--watchers {path}: holds no Watcher")
    return watchers


def fixture_crds(directory: Path = CRD_DIR) -> list[dict[str, Any]]:
    """The CRDs the KCP needs (Watcher, Kyma, Istio Gateway and VirtualService)."""
    crds: list[dict[str, Any]] = []
    for path in sorted(directory.glob("*.yaml")):
        with open(path, encoding="utf-8") as stream:
            crds.extend(dict(d) for d in yaml.safe_load_all(stream) if d)
    if not crds:
        raise ManifestInputError(f"no CRDs in {directory}")
    return crds


def build_inputs(
    *,
    image: str,
    kcp_addr: str,
    runtime_id: str | None = None,
    skr_domain: str | None = None,
    watchers_file: Path | None = None,
    certs: Path | None = None,
    network_policies: NetworkPolicyMode = "upstream",
    node_port: int | None = None,
    envoy_image: str | None = None,
    gateway_hosts: Sequence[str] = ("listener.kyma.local",),
    contract: Contract = "v2",
) -> ManifestInputs:
    """Both parameter sets from one PKI, so the SKR trusts the gateway and vice versa."""
    try:
        kcp_host = _host(kcp_addr)
    except ValueError as exc:
        raise ManifestInputError(f"--kcp-addr: {exc}") from None
    if certs is None:
        runtime_id = runtime_id or DEFAULT_RUNTIME_ID
        skr_domain = skr_domain or DEFAULT_SKR_DOMAIN
        material = generate_pki(runtime_id, skr_domain, kcp_host)
    else:
        material = load_pki(certs)
        cert = _certificate(material.skr_cert, certs / "skr.crt")
        runtime_id = runtime_id or pki.name_cn(cert.subject)
        skr_domain = skr_domain or _skr_domain(cert)
        check_pki(
            material,
            runtime_id=runtime_id,
            skr_domain=skr_domain,
            kcp_host=kcp_host,
            where=f"--certs {certs}",
        )
    watchers = load_watchers(watchers_file)
    skr = SkrManifestParams(
        image=image,
        kcp_addr=kcp_addr,
        tls=material.skr_tls(),
        watchers=watchers,
        contract=contract,
        network_policies=network_policies,
    )
    kcp_kwargs: dict[str, Any] = {}
    if envoy_image:
        kcp_kwargs["envoy_image"] = envoy_image
    kcp = KcpManifestParams(
        crds=fixture_crds(),
        gateway_tls=material.gateway_tls(),
        watchers=watchers,
        runtimes=(Runtime(runtime_id, skr_domain),),
        gateway_hosts=tuple(gateway_hosts),
        node_port=node_port,
        contract=contract,
        **kcp_kwargs,
    )
    return ManifestInputs(skr=skr, kcp=kcp, pki=material)
