"""``watcher-harness render``: the installable SKR and KCP manifests, as YAML.

Writes ``skr.yaml`` and ``kcp.yaml`` into ``--out DIR`` (plus ``pki/`` when the
certificates were generated), or both sets to stdout (``--out -``, the default).
``--only skr|kcp`` renders one set. Bad input exits 2 with one line on stderr naming the
option or file; nothing is written then.
"""

from __future__ import annotations

import argparse
import inspect
import sys
from pathlib import Path

from harness.manifests import build_inputs, dump_yaml, write_manifests
from harness.manifests.inputs import DEFAULT_RUNTIME_ID, DEFAULT_SKR_DOMAIN, ManifestInputError
from watcher.errors import WatcherError
from watcher.render.kcp_manifests import ENVOY_IMAGE, render_kcp_manifests
from watcher.render.skr_manifests import render_skr_manifests

EXIT_INVALID = 2
DEFAULT_IMAGE = "kyma-watcher:0.1.0"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "render",
        help="write the installable SKR and KCP manifests as YAML",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--kcp-addr",
        required=True,
        metavar="HOST:PORT",
        help="the KCP gateway as SKRs reach it (the webhook's KCP_ADDR)",
    )
    p.add_argument(
        "--image", default=DEFAULT_IMAGE, help=f"webhook image (default {DEFAULT_IMAGE})"
    )
    p.add_argument(
        "--runtime-id",
        help=f"CN of the runtime certificate (default: from --certs, else {DEFAULT_RUNTIME_ID})",
    )
    p.add_argument(
        "--skr-domain",
        help=f"the SKR's domain, a SAN of its certificate (default: from --certs, else "
        f"{DEFAULT_SKR_DOMAIN})",
    )
    p.add_argument(
        "--watchers",
        dest="watchers_file",
        type=Path,
        metavar="FILE",
        help="Watcher CRs (multi-document YAML); default: KLM's klm-watcher",
    )
    p.add_argument(
        "--certs",
        type=Path,
        metavar="DIR",
        help="certificates from `python -m watcher certs DIR`; default: a fresh CA, "
        "written to OUT/pki/",
    )
    p.add_argument(
        "--out",
        default="-",
        metavar="DIR",
        help="output directory, or - for stdout (default)",
    )
    p.add_argument("--only", choices=["skr", "kcp"], help="render one set only")
    p.add_argument(
        "--network-policies",
        choices=["upstream", "portable", "none"],
        default="upstream",
        help="upstream: webhook reachable from Gardener's vpn-shoot only; portable: its "
        "port from anywhere (kind, plain clusters); none",
    )
    p.add_argument(
        "--node-port", type=int, help="expose the KCP gateway on this node port (30000-32767)"
    )
    p.add_argument("--envoy-image", default=ENVOY_IMAGE, help=f"default {ENVOY_IMAGE}")
    p.set_defaults(func=render)


def render(args: argparse.Namespace) -> int:
    try:
        # Every option named like a keyword of build_inputs is that keyword.
        keywords = inspect.signature(build_inputs).parameters
        inputs = build_inputs(**{k: getattr(args, k) for k in keywords if hasattr(args, k)})
        sets = {}
        if args.only in (None, "skr"):
            sets["skr"] = render_skr_manifests(inputs.skr)
        if args.only in (None, "kcp"):
            sets["kcp"] = render_kcp_manifests(inputs.kcp)
    except (ManifestInputError, WatcherError, ValueError) as exc:
        print(f"watcher-harness render: {exc}", file=sys.stderr)
        return EXIT_INVALID
    runtime = inputs.kcp.runtimes[0]
    origin = "generated (see pki/)" if inputs.pki.generated else f"from {args.certs}"
    headers = {
        name: f"Kyma runtime watcher: {name.upper()} manifests (watcher-harness render)\n"
        f"runtime id {runtime.runtime_id}, skr-domain {runtime.skr_domain}, "
        f"KCP gateway {args.kcp_addr}; certificates {origin}"
        for name in sets
    }
    if args.out == "-":
        sys.stdout.write("\n".join(dump_yaml(objs, header=headers[n]) for n, objs in sets.items()))
        if inputs.pki.generated:
            print(
                "watcher-harness render: certificates were generated for this output only; "
                "use --out DIR to keep them, or --certs DIR",
                file=sys.stderr,
            )
        return 0
    try:
        written = write_manifests(
            Path(args.out),
            sets,
            headers=headers,
            pki_files=inputs.pki.files() if inputs.pki.generated else None,
        )
    except OSError as exc:
        print(f"watcher-harness render: cannot write {args.out}: {exc}", file=sys.stderr)
        return 1
    for path in written:
        print(path)
    return 0
