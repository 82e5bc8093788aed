"""``python -m watcher certs DIR``: a KCP CA and the certificates a local try-out needs.

Production gets these from cert-manager; a newcomer running a webhook and a listener by
hand needs the same shapes without a cluster: the CA bundle, one runtime certificate
(CN = runtime id, SANs = skr-domain + the webhook Service names + 127.0.0.1/localhost so
it can also serve) and one KCP server certificate for the listener.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from watcher import pki
from watcher.errors import WatcherError


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("certs", help="write a KCP CA, a runtime certificate and a KCP server cert")
    p.add_argument("directory", type=Path)
    p.add_argument("--runtime-id", default="runtime-a", help="CN of the runtime certificate")
    p.add_argument("--skr-domain", default="skr-a.example.com", help="DNS SAN pinned by KCP")


def run(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    directory: Path = args.directory
    try:
        directory.mkdir(parents=True, exist_ok=True)
        ca = pki.create_ca()
        skr = pki.issue_runtime_certificate(
            ca,
            args.runtime_id,
            args.skr_domain,
            extra_dns_names=["localhost"],
            extra_ip_addresses=["127.0.0.1"],
        )
        kcp = pki.issue_server_certificate(ca, "kcp-listener", client_auth=True)
        files = {
            "ca.crt": ca.cert_pem,
            "skr.crt": skr.cert_pem,
            "skr.key": skr.key_pem,
            "kcp.crt": kcp.cert_pem,
            "kcp.key": kcp.key_pem,
        }
        for name, data in files.items():
            pki.write_atomic(directory / name, data)
    except (OSError, WatcherError, ValueError) as exc:
        print(f"watcher certs: cannot write {directory}: {exc}", file=stderr)
        return 2
    print(f"wrote {', '.join(files)} to {directory}", file=stdout)
    return 0
