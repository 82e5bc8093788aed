"""Free ports are bindable, and port races are recognised in real servers' logs."""

from __future__ import annotations

import socket

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
