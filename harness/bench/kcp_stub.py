"""A KCP for benchmarks: the real listener, answering after a configurable delay.

Upstream's webhook blocks the SKR API server while the KCP is slow; to show the difference
the benchmark needs a KCP that is slow on purpose. The delay is a verify hook, so every
other part of the request path is the product's own listener. Events are consumed and
dropped; ``watcher_listener_events_accepted_total`` on ``/metrics`` counts them.

Behind a gateway (``--identity xfcc``: plain HTTP on loopback, or with ``--gateway-ca``
mTLS that believes only the gateway's XFCC) ``--domains FILE`` turns on SAN pinning with
a lookup answering from a JSON map runtime id → SKR domain, as KLM's Kyma cache would.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
from collections.abc import Mapping
from pathlib import Path

from watcher.listener import (
    SKR_DOMAIN_ANNOTATION,
    KymaLookup,
    Listener,
    ListenerConfig,
    TrustedGateways,
    VerifyHook,
    VerifyRequest,
    direct_mtls_context,
    gateway_mtls_context,
    san_pinning,
)
from watcher.model import ObjectKey


def _delay_hook(seconds: float) -> VerifyHook:
    async def hook(request: VerifyRequest) -> None:
        del request
        await asyncio.sleep(seconds)

    return hook


def dict_lookup(domains: Mapping[str, str]) -> KymaLookup:
    """SAN-pinning lookup from a map runtime id → SKR domain (the Kyma's annotation)."""
    annotations = {rid: {SKR_DOMAIN_ANNOTATION: d} for rid, d in domains.items()}

    async def lookup(runtime_id: str, owner: ObjectKey | None) -> Mapping[str, str] | None:
        del owner
        return annotations.get(runtime_id)

    return lookup


async def serve(args: argparse.Namespace) -> None:
    hooks: list[VerifyHook] = [_delay_hook(args.delay)] if args.delay > 0 else []
    if args.domain_map is not None:
        hooks.append(san_pinning(dict_lookup(args.domain_map)))
    if args.identity == "xfcc":
        gateway_mtls = args.gateway_ca is not None
        config = ListenerConfig(
            component=args.component,
            port=args.port,
            identity="xfcc",
            # Without --gateway-ca: the plain-HTTP opt-out (XFCC believed from anyone).
            ssl_context=(
                gateway_mtls_context(args.tls_cert, args.tls_key, args.gateway_ca)
                if gateway_mtls
                else None
            ),
            trusted_gateways=(
                TrustedGateways.of(args.trusted_gateway or ["kcp-gateway"])
                if gateway_mtls
                else None
            ),
            buffer_size=4096,
            verify_hooks=tuple(hooks),
        )
    else:
        config = ListenerConfig(
            component=args.component,
            port=args.port,
            ssl_context=direct_mtls_context(args.tls_cert, args.tls_key, args.ca_cert),
            identity="direct-mtls",
            buffer_size=4096,
            verify_hooks=tuple(hooks),
        )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with Listener(config) as listener:

        async def drain() -> None:
            async for _ in listener.events():
                pass

        consumer = asyncio.create_task(drain())
        await stop.wait()
        consumer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await consumer


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m harness.bench.kcp_stub")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--component", default="lifecycle-manager")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before answering")
    parser.add_argument("--identity", choices=("direct-mtls", "xfcc"), default="direct-mtls")
    parser.add_argument("--domains", help="JSON file runtime id → SKR domain: SAN pinning on")
    parser.add_argument("--tls-cert")
    parser.add_argument("--tls-key")
    parser.add_argument("--ca-cert")
    parser.add_argument("--gateway-ca", help="xfcc: serve mTLS, believe only gateway peers")
    parser.add_argument("--trusted-gateway", action="append", help="xfcc: allow-list entry")
    args = parser.parse_args()
    if args.identity == "direct-mtls" and not (args.tls_cert and args.tls_key and args.ca_cert):
        parser.error("direct-mtls needs --tls-cert, --tls-key and --ca-cert")
    if args.gateway_ca and not (args.identity == "xfcc" and args.tls_cert and args.tls_key):
        parser.error("--gateway-ca needs --identity xfcc, --tls-cert and --tls-key")
    args.domain_map = json.loads(Path(args.domains).read_text()) if args.domains else None
    asyncio.run(serve(args))


if __name__ == "__main__":
    main()
