"""Fixtures for the listener tests: real certificates, real servers, no leaked tasks."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import aiohttp
import pytest
import trustme
from cryptography import x509
from listener_testing import TlsFiles, make_cert, running

from watcher.listener import Listener


@pytest.fixture
def cert_factory() -> Callable[..., x509.Certificate]:
    return make_cert


@pytest.fixture
def tls_files(tmp_path: Path) -> TlsFiles:
    ca = trustme.CA()
    server = ca.issue_cert("127.0.0.1", "localhost")
    client = ca.issue_cert("skr-a.example.com", common_name="runtime-tls")
    files = TlsFiles(
        ca=ca,
        ca_file=tmp_path / "ca.crt",
        server_cert=tmp_path / "tls.crt",
        server_key=tmp_path / "tls.key",
        client_chain=tmp_path / "client.pem",
    )
    ca.cert_pem.write_to_path(files.ca_file)
    server.cert_chain_pems[0].write_to_path(files.server_cert)
    server.private_key_pem.write_to_path(files.server_key)
    client.private_key_and_cert_chain_pem.write_to_path(files.client_chain)
    return files


@pytest.fixture
async def session(no_leaked_tasks: None) -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as client:
        yield client


@pytest.fixture
async def listener() -> AsyncIterator[Listener]:
    async with running() as started:
        yield started
