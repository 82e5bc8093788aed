"""Run a webhook command in a network namespace of its own, reachable only through us.

A bring-your-own webhook (``--webhook-command``) takes upstream's environment contract,
and upstream's binary binds every interface (``:8443``, ``:2112``): run as it is, it would
listen on this host's every address. This launcher gives it a network namespace with
nothing but its own loopback and bridges exactly three TCP paths through Unix sockets
(the filesystem is shared, the network is not)::

    this host's network (launcher)          the command's namespace (bridge, then command)
    TCP <admission> ──▶ port-0.sock ──▶ TCP 127.0.0.1:<WEBHOOK_PORT>
    TCP <metrics>   ──▶ port-1.sock ──▶ TCP 127.0.0.1:<METRICS_PORT>
    TCP <gateway>   ◀── kcp.sock    ◀── TCP 127.0.0.1:<port of KCP_ADDR>

Bytes pass unchanged (TLS end to end, :mod:`harness.skr.bridge`), so the API server, the
probes and the gateway see the command as if it listened on ``<admission>`` itself.
``--publish HOST:PORT:TARGET`` (repeatable) bridges ``HOST:PORT`` here to
``127.0.0.1:TARGET`` inside, as a container port on a host port (``--admission`` and
``--metrics`` are ``--publish`` with ``TARGET`` equal to ``PORT``). A ``--kcp`` host that
resolves to loopback only (``localhost``) keeps its name in ``KCP_ADDR``, so the command
checks the gateway's certificate against the name it was given.

All three processes share one process group: SIGTERM reaches the command directly; the
launcher and the bridge keep bridging until it has exited (a draining webhook still
reaches the KCP), then exit with its status. A namespace needs ``CAP_SYS_ADMIN``; without
it the launcher exits 3 saying so. Usage (as :class:`harness.skr.webhook.WebhookProcess`
and ``harness.platform.kubelet`` run it)::

    python -m harness.skr.isolate --admission 127.0.0.1:8443 --metrics 127.0.0.1:2112 \\
        --kcp 127.0.0.1:30443 -- CMD [ARG...]
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import fcntl
import ipaddress
import os
import shutil
import signal
import socket
import struct
import sys
import tempfile
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.clusters.ports import LOOPBACK
from harness.skr.bridge import Bridges, tcp_opener, unix_opener

CLONE_NEWNET = 0x40000000
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
EXIT_NO_NAMESPACE = 3
PROG = "python -m harness.skr.isolate"


def _address(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not HOST:PORT")
    return host, int(port)


def _published(text: str) -> tuple[str, int, int]:
    rest, sep, target = text.rpartition(":")
    if not sep or not target.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not HOST:PORT:TARGET")
    host, port = _address(rest)
    return host, port, int(target)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--admission", type=_address, help="HOST:PORT to serve, bridged to the same port inside"
    )
    p.add_argument(
        "--metrics", type=_address, help="HOST:PORT to serve, bridged to the same port inside"
    )
    p.add_argument(
        "--publish",
        type=_published,
        action="append",
        default=[],
        metavar="HOST:PORT:TARGET",
        help="serve HOST:PORT, bridged to 127.0.0.1:TARGET inside (repeatable)",
    )
    p.add_argument(
        "--kcp", type=_address, help="the gateway's HOST:PORT (left out: KCP_ADDR stays unset)"
    )
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- CMD [ARG...]")
    return p


def enter_own_network() -> None:
    """Move this process into a new network namespace and bring its loopback up."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNET) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"unshare(CLONE_NEWNET): {os.strerror(code)}")
    with socket.socket() as s:
        request = struct.pack("16sh", b"lo", 0)
        flags = struct.unpack("16sh", fcntl.ioctl(s, SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sh", b"lo", flags | IFF_UP))


async def _serve_until(
    servers: Sequence[asyncio.Server], bridges: Bridges, finished: Awaitable[int]
) -> int:
    """Serve until ``finished`` gives the command's exit status; SIGTERM does not stop
    us (the command gets it too and decides when it is done). Then every connection
    still bridged is closed."""
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, lambda: None)
    loop.add_signal_handler(signal.SIGINT, lambda: None)
    try:
        return await finished
    finally:
        for server in servers:
            server.close()
        await bridges.close()


def _wait_status(pid: int) -> int:
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def _port_socket(run: Path, index: int) -> Path:
    return run / f"port-{index}.sock"


async def _host_side(
    published: Sequence[socket.socket],
    kcp: socket.socket | None,
    kcp_address: tuple[str, int] | None,
    child: int,
    run: Path,
) -> int:
    """This host's network: the published ports into the namespace, the KCP out of it."""
    bridges = Bridges()
    servers = [
        await asyncio.start_server(bridges.handler(unix_opener(_port_socket(run, i))), sock=sock)
        for i, sock in enumerate(published)
    ]
    if kcp is not None and kcp_address is not None:
        to_kcp = bridges.handler(tcp_opener(kcp_address))
        servers.append(await asyncio.start_unix_server(to_kcp, sock=kcp))
    finished = asyncio.get_running_loop().run_in_executor(None, _wait_status, child)
    return await _serve_until(servers, bridges, finished)


@dataclass(frozen=True)
class KcpInside:
    """Where the namespace side serves the KCP bridge, and what ``KCP_ADDR`` says."""

    hosts: tuple[str, ...]  # loopback addresses to listen on inside
    port: int
    kcp_addr: str


def kcp_inside(host: str, port: int) -> KcpInside:
    """A host that resolves to loopback only (``localhost``) keeps its name in ``KCP_ADDR``
    and is served on those addresses inside; any other is ``127.0.0.1:<port>`` inside."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError:
        infos = []
    addresses = tuple(dict.fromkeys(str(info[4][0]) for info in infos))
    if addresses and all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in addresses):
        return KcpInside(addresses, port, f"{host}:{port}")
    return KcpInside((LOOPBACK,), port, f"{LOOPBACK}:{port}")


async def _namespace_side(
    targets: Sequence[int], kcp: KcpInside | None, run: Path, command: Sequence[str]
) -> int:
    """The command's namespace: its published ports out, its KCP requests to the host side."""
    bridges = Bridges()
    servers = [
        await asyncio.start_unix_server(
            bridges.handler(tcp_opener((LOOPBACK, target))), path=str(_port_socket(run, i))
        )
        for i, target in enumerate(targets)
    ]
    env = dict(os.environ)
    env.pop("KCP_ADDR", None)
    if kcp is not None:
        to_host = bridges.handler(unix_opener(run / "kcp.sock"))
        failure: OSError | None = None
        for host in kcp.hosts:
            try:
                servers.append(await asyncio.start_server(to_host, host, kcp.port))
            except OSError as exc:  # e.g. ::1 where the namespace has no IPv6
                failure = exc
        if failure is not None and len(servers) == len(targets):
            raise failure  # not one address of the KCP could be served inside
        env["KCP_ADDR"] = kcp.kcp_addr
    try:
        process = await asyncio.create_subprocess_exec(*command, env=env)
    except OSError as exc:
        print(f"{PROG}: cannot run {command[0]!r}: {exc}", file=sys.stderr)
        return 127
    return await _serve_until(servers, bridges, process.wait())


def _listen(address: tuple[str, int]) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(address)
    except OSError:
        s.close()
        raise
    s.listen(128)
    return s


def _start_namespace_side(
    targets: Sequence[int],
    kcp: KcpInside | None,
    command: list[str],
    run: Path,
    inherited: Sequence[socket.socket],
) -> int:
    """Fork the namespace side; return its pid once its namespace exists (or raise)."""
    ready_r, ready_w = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(ready_r)
        for s in inherited:  # the host side's sockets stay with the host side
            s.close()
        try:
            enter_own_network()
        except OSError as exc:
            os.write(ready_w, str(exc).encode() or b"failed")
            os._exit(EXIT_NO_NAMESPACE)
        os.close(ready_w)
        try:
            code = asyncio.run(_namespace_side(targets, kcp, run, command))
        except BaseException as exc:  # never fall back into the parent's code after fork
            print(f"{PROG}: namespace side failed: {exc!r}", file=sys.stderr)
            code = 1
        os._exit(code if 0 <= code < 256 else 1)
    os.close(ready_w)
    with os.fdopen(ready_r, "rb") as ready:
        failure = ready.read()
    if failure:
        _wait_status(child)
        raise NamespaceUnavailable(failure.decode(errors="replace"))
    return child


class NamespaceUnavailable(OSError):
    """The kernel refused a new network namespace (no CAP_SYS_ADMIN)."""


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    command = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        print(f"{PROG}: error: no command after --", file=sys.stderr)
        return 2
    published: list[tuple[str, int, int]] = [
        (address[0], address[1], address[1])
        for address in (args.admission, args.metrics)
        if address is not None
    ]
    published += args.publish
    kcp_target = kcp_inside(*args.kcp) if args.kcp is not None else None
    run = Path(tempfile.mkdtemp(prefix="webhook-netns-"))
    listening: list[socket.socket] = []
    kcp: socket.socket | None = None
    try:
        try:
            listening += [_listen((host, port)) for host, port, _ in published]
        except OSError as exc:
            print(f"{PROG}: cannot listen: {exc}", file=sys.stderr)
            return 1
        if args.kcp is not None:
            kcp = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            kcp.bind(str(run / "kcp.sock"))
            kcp.listen(128)
        inherited = [*listening, *([kcp] if kcp is not None else [])]
        targets = [target for _, _, target in published]
        try:
            child = _start_namespace_side(targets, kcp_target, command, run, inherited)
        except NamespaceUnavailable as exc:
            print(
                f"{PROG}: cannot give the webhook a network namespace of its own ({exc}); "
                "this needs CAP_SYS_ADMIN (run as root) — or set "
                "WATCHER_HARNESS_WEBHOOK_ISOLATION=none to run the command in this host's "
                "network, where upstream's webhook binds every interface",
                file=sys.stderr,
            )
            return EXIT_NO_NAMESPACE
        return asyncio.run(_host_side(listening, kcp, args.kcp, child, run))
    finally:
        for s in [*listening, *([kcp] if kcp is not None else [])]:
            s.close()
        shutil.rmtree(run, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
