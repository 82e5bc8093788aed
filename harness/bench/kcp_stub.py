"""A KCP for benchmarks: the real listener, answering after a configurable delay.

Upstream's webhook blocks the SKR API server while the KCP is slow; to show the difference
the benchmark needs a KCP that is slow on purpose. The delay is a verify hook, so every
other part of the request path is the product's own listener. Events are consumed and
dropped; ``watcher_listener_events_accepted_total`` on ``/metrics`` counts them.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal

from watcher.listener import (
    Listener,
    ListenerConfig,
    VerifyHook,
    VerifyRequest,
    direct_mtls_context,
)


def _delay_hook(seconds: float) -> VerifyHook:
    async def hook(request: VerifyRequest) -> None:
        del request
        await asyncio.sleep(seconds)

    return hook


async def serve(args: argparse.Namespace) -> None:
    config = ListenerConfig(
        component=args.component,
        port=args.port,
        ssl_context=direct_mtls_context(args.tls_cert, args.tls_key, args.ca_cert),
        identity="direct-mtls",
        buffer_size=4096,
        verify_hooks=(_delay_hook(args.delay),) if args.delay > 0 else (),
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
    parser.add_argument("--tls-cert", required=True)
    parser.add_argument("--tls-key", required=True)
    parser.add_argument("--ca-cert", required=True)
    asyncio.run(serve(parser.parse_args()))


if __name__ == "__main__":
    main()
