"""Free ports are bindable, and port races are recognised in real servers' logs."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from harness.clusters import ports
from harness.clusters.ports import address_in_use, free_port


def test_free_port_can_be_bound() -> None:
    port = free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))


def test_address_in_use_is_recognised() -> None:
    etcd = '{"level":"fatal","msg":"listen tcp 127.0.0.1:2379: bind: address already in use"}'
    apiserver = "E1122 failed to listen on 127.0.0.1:6443: bind: Address already in use"
    assert address_in_use(etcd) and address_in_use(apiserver)
    assert not address_in_use("unknown flag: --bogus")


def test_free_ports_lie_below_the_kernels_ephemeral_range() -> None:
    low = ports._ephemeral_start() - ports.RESERVED_PORTS
    picked = {free_port() for _ in range(20)}
    assert len(picked) == 20  # reserved: never handed out twice
    assert all(low <= p < ports._ephemeral_start() for p in picked)


def test_a_port_another_harness_process_reserved_is_not_picked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    start = free_port() + 1  # three ports just above one we hold: most likely free
    monkeypatch.setattr(ports, "_ephemeral_start", lambda: start + 3)
    monkeypatch.setattr(ports, "RESERVED_PORTS", 3)
    monkeypatch.setattr(ports, "_held", {})
    locks = [str(ports._lock_dir() / str(p)) for p in (start, start + 1)]
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, sys, time\n"
            "files = [open(p, 'a') for p in sys.argv[1:]]\n"
            "[fcntl.flock(f, fcntl.LOCK_EX) for f in files]\n"
            "print('held', flush=True); time.sleep(30)",
            *locks,
        ],
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
        assert free_port() == start + 2
    finally:
        holder.kill()
        holder.communicate()
