"""``watcher-listener``: run a listener and print every accepted event as a JSON line.

Behind the KCP gateway (the default, XFCC identity) the listener must know who may send
``X-Forwarded-Client-Cert``: either ``--gateway-ca`` (serve mTLS, accept only client
certificates from that CA whose names are on ``--trusted-gateway``) or the explicit
opt-out ``--insecure-trust-any-xfcc`` (plain HTTP, anyone who can connect is believed:
only for local tests). Each of these flags can also come from the environment
(``WATCHER_LISTENER_GATEWAY_CA``, ``WATCHER_LISTENER_TRUSTED_GATEWAYS`` comma-separated,
``WATCHER_LISTENER_INSECURE_TRUST_ANY_XFCC=true``).

stdout carries only events (one JSON object per line, flushed), so it can be piped into
tests and tools; logs are JSON lines on stderr, warnings and errors only unless
``--log-level`` says otherwise. SIGINT/SIGTERM stop it cleanly with exit code 0. Usage
errors and unreadable certificate files end it with one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import sys
from typing import Any, NoReturn, TextIO

from watcher.errors import WatcherError
from watcher.listener.config import ListenerConfig
from watcher.listener.event_lines import event_line
from watcher.listener.gateway_trust import TrustedGateways
from watcher.listener.server import Listener
from watcher.listener.tls import direct_mtls_context, gateway_mtls_context, server_context

PROG = "watcher-listener"
EXIT_USAGE = 2
DEFAULT_TRUSTED_GATEWAY = "kcp-gateway"
ENV_GATEWAY_CA = "WATCHER_LISTENER_GATEWAY_CA"
ENV_TRUSTED_GATEWAYS = "WATCHER_LISTENER_TRUSTED_GATEWAYS"
ENV_INSECURE = "WATCHER_LISTENER_INSECURE_TRUST_ANY_XFCC"


class UsageError(Exception):
    """Bad flags or unusable files: reported as one line, exit code 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("--component", required=True, help="manager name in /v2/<name>/event")
    parser.add_argument("--port", type=int, default=8082, help="0 picks a free port")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--contract", choices=["v1", "v2"], default="v2")
    parser.add_argument(
        "--direct-mtls",
        action="store_true",
        help="no gateway: require TLS client certificates and take the runtime id from them",
    )
    parser.add_argument("--tls-cert", help="server certificate (PEM)")
    parser.add_argument("--tls-key", help="server key (PEM)")
    parser.add_argument("--ca-cert", help="CA bundle for client certificates (PEM)")
    parser.add_argument(
        "--gateway-ca",
        default=os.environ.get(ENV_GATEWAY_CA) or None,
        help="XFCC mode: serve mTLS and accept only client certificates from this CA "
        f"(the gateway's); needs --tls-cert/--tls-key [env {ENV_GATEWAY_CA}]",
    )
    parser.add_argument(
        "--trusted-gateway",
        action="append",
        metavar="NAME",
        help="XFCC mode with --gateway-ca: a gateway identity whose XFCC is believed "
        "(cn:/dns:/uri: prefix, or a bare name matching any of them); repeatable; "
        f"default {DEFAULT_TRUSTED_GATEWAY} [env {ENV_TRUSTED_GATEWAYS}, comma-separated]",
    )
    parser.add_argument(
        "--insecure-trust-any-xfcc",
        action="store_true",
        default=os.environ.get(ENV_INSECURE, "").lower() in ("1", "true", "yes"),
        help="XFCC mode without --gateway-ca: believe X-Forwarded-Client-Cert from anyone "
        f"who can connect (local tests only) [env {ENV_INSECURE}=true]",
    )
    parser.add_argument("--buffer", type=int, default=64, help="events buffered (0: unbuffered)")
    parser.add_argument(
        "--backpressure-timeout",
        type=float,
        default=5.0,
        help="seconds a request waits for buffer room before 503",
    )
    parser.add_argument(
        "--header-timeout",
        type=float,
        default=15.0,
        help="seconds a connection may take to send a complete request head (slowloris)",
    )
    parser.add_argument(
        "--body-timeout",
        type=float,
        default=10.0,
        help="seconds a request body may take after its head before 408",
    )
    parser.add_argument(
        "--log-level", choices=["debug", "info", "warning", "error"], default="warning"
    )
    return parser


def config_from_args(args: argparse.Namespace) -> ListenerConfig:
    """Validate flag combinations and load TLS files; ``UsageError`` says what is wrong."""
    if args.direct_mtls and not (args.tls_cert and args.tls_key and args.ca_cert):
        raise UsageError("--direct-mtls needs --tls-cert, --tls-key and --ca-cert")
    if bool(args.tls_cert) != bool(args.tls_key):
        raise UsageError("--tls-cert and --tls-key go together")
    if args.ca_cert and not args.direct_mtls:
        raise UsageError("--ca-cert is only used with --direct-mtls")
    trusted = _trusted_gateways(args)
    try:
        if args.direct_mtls:
            ssl_context = direct_mtls_context(args.tls_cert, args.tls_key, args.ca_cert)
        elif args.gateway_ca:
            ssl_context = gateway_mtls_context(args.tls_cert, args.tls_key, args.gateway_ca)
        elif args.tls_cert:
            ssl_context = server_context(args.tls_cert, args.tls_key)
        else:
            ssl_context = None
        config = ListenerConfig(
            component=args.component,
            contract=args.contract,
            host=args.host,
            port=args.port,
            ssl_context=ssl_context,
            identity="direct-mtls" if args.direct_mtls else "xfcc",
            trusted_gateways=trusted,
            buffer_size=args.buffer,
            backpressure_timeout=args.backpressure_timeout,
            header_timeout=args.header_timeout,
            body_timeout=args.body_timeout,
        )
    except WatcherError as exc:
        raise UsageError(str(exc)) from None
    if config.xfcc_trust == "any-client" and not args.insecure_trust_any_xfcc:
        raise UsageError(
            "XFCC mode needs --gateway-ca (only the gateway may send X-Forwarded-Client-Cert) "
            "or the explicit opt-out --insecure-trust-any-xfcc; or use --direct-mtls"
        )
    return config


def _trusted_gateways(args: argparse.Namespace) -> TrustedGateways | None:
    """The gateway allow-list in XFCC mode; ``None`` for direct mTLS or the opt-out."""
    named = args.trusted_gateway
    if named is None and os.environ.get(ENV_TRUSTED_GATEWAYS):
        named = [n for n in os.environ[ENV_TRUSTED_GATEWAYS].split(",") if n.strip()]
    if args.direct_mtls:
        if args.gateway_ca or args.trusted_gateway or args.insecure_trust_any_xfcc:
            raise UsageError(
                "--gateway-ca, --trusted-gateway and --insecure-trust-any-xfcc are for XFCC "
                "mode; --direct-mtls ignores XFCC"
            )
        return None
    if args.gateway_ca and args.insecure_trust_any_xfcc:
        raise UsageError("--gateway-ca and --insecure-trust-any-xfcc exclude each other")
    if args.gateway_ca:
        if not (args.tls_cert and args.tls_key):
            raise UsageError(
                "--gateway-ca needs --tls-cert and --tls-key (the listener serves TLS)"
            )
        try:
            return TrustedGateways.of(named or [DEFAULT_TRUSTED_GATEWAY])
        except WatcherError as exc:
            raise UsageError(str(exc)) from None
    if named:
        raise UsageError("--trusted-gateway needs --gateway-ca")
    return None


class JsonLogFormatter(logging.Formatter):
    """One JSON object per record; ``extra={"fields": {...}}`` becomes top-level keys."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": round(record.created, 6),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            entry.update(fields)
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def _setup_logging(level: str, stream: TextIO) -> logging.Handler:
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonLogFormatter())
    root = logging.getLogger("watcher")
    root.addHandler(handler)
    root.setLevel(level.upper())
    return handler


async def _print_events(listener: Listener, out: TextIO) -> None:
    async for event in listener.events():
        out.write(event_line(event) + "\n")
        out.flush()


async def serve(config: ListenerConfig, out: TextIO) -> None:
    """Run until SIGINT/SIGTERM (or until stdout breaks), then stop cleanly."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    signals = (signal.SIGINT, signal.SIGTERM)
    for sig in signals:
        loop.add_signal_handler(sig, stop.set)
    try:
        async with Listener(config) as listener:
            printer = asyncio.create_task(_print_events(listener, out), name="listener-printer")
            stopper = asyncio.create_task(stop.wait(), name="listener-stop-signal")
            try:
                await asyncio.wait({printer, stopper}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                stopper.cancel()
        # The stream is closed now: the printer drains what was accepted, then ends.
        await printer
    finally:
        for sig in signals:
            loop.remove_signal_handler(sig)


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        config = config_from_args(args)
    except UsageError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    handler = _setup_logging(args.log_level, sys.stderr)
    try:
        asyncio.run(serve(config, sys.stdout))
    except WatcherError as exc:  # e.g. the port is taken
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # whoever read our stdout went away
        return 1
    finally:
        logging.getLogger("watcher").removeHandler(handler)
    return 0


if __name__ == "__main__":
    sys.exit(main())
