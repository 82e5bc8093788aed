"""``watcher-listener``: run a listener and print every accepted event as a JSON line.

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
import signal
import sys
from typing import Any, NoReturn, TextIO

from watcher.errors import WatcherError
from watcher.listener.config import ListenerConfig
from watcher.listener.server import Listener
from watcher.listener.stream import ListenerEvent
from watcher.listener.tls import direct_mtls_context, server_context

PROG = "watcher-listener"
EXIT_USAGE = 2


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
    parser.add_argument("--buffer", type=int, default=64, help="events buffered (0: unbuffered)")
    parser.add_argument(
        "--backpressure-timeout",
        type=float,
        default=5.0,
        help="seconds a request waits for buffer room before 503",
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
    try:
        if args.direct_mtls:
            ssl_context = direct_mtls_context(args.tls_cert, args.tls_key, args.ca_cert)
        elif args.tls_cert:
            ssl_context = server_context(args.tls_cert, args.tls_key)
        else:
            ssl_context = None
        return ListenerConfig(
            component=args.component,
            contract=args.contract,
            host=args.host,
            port=args.port,
            ssl_context=ssl_context,
            identity="direct-mtls" if args.direct_mtls else "xfcc",
            buffer_size=args.buffer,
            backpressure_timeout=args.backpressure_timeout,
        )
    except WatcherError as exc:
        raise UsageError(str(exc)) from None


def event_line(event: ListenerEvent) -> str:
    """The stdout representation of one accepted event."""
    watched = event.event.watched
    gvk = event.event.watched_gvk
    line: dict[str, Any] = {
        "runtime_id": event.runtime_id,
        "watched": {"namespace": watched.namespace, "name": watched.name},
        "watched_gvk": {"group": gvk.group, "version": gvk.version, "kind": gvk.kind},
        "received_at": event.received_at,
    }
    if event.contract == "v1" and event.event.owner is not None:
        owner = event.event.owner
        line["owner"] = {"namespace": owner.namespace, "name": owner.name}
    return json.dumps(line, separators=(",", ":"))


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
