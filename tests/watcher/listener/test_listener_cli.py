"""``watcher-listener`` as a user runs it: a real process, real HTTP, real signals."""

from __future__ import annotations

import asyncio
import json
import signal
import ssl
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp
import pytest
from listener_testing import TlsFiles, make_cert

from watcher.listener import XFCC_HEADER, format_xfcc

pytestmark = pytest.mark.usefixtures("no_leaked_tasks")

BODY = (
    b'{"watched":{"Namespace":"kyma-system","Name":"default"},'
    b'"watchedGvk":{"group":"operator.kyma-project.io","version":"v1beta2","kind":"Kyma"}}'
)
_SCRIPT = Path(sys.executable).parent / "watcher-listener"
COMMAND = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "watcher.listener.cli"]
DEADLINE = 20.0


@asynccontextmanager
async def cli(*args: str) -> AsyncIterator[tuple[asyncio.subprocess.Process, str]]:
    """Start the CLI with ``--port 0``; yield it with its URL once it logged 'listening'."""
    process = await asyncio.create_subprocess_exec(
        *COMMAND,
        "--port",
        "0",
        "--log-level",
        "info",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert process.stderr is not None
        async with asyncio.timeout(DEADLINE):
            while True:
                line = await process.stderr.readline()
                assert line, f"exited before listening (code {await process.wait()})"
                record = json.loads(line)
                if record["msg"] == "listening":
                    break
        yield process, record["url"]
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def stop(process: asyncio.subprocess.Process, sig: int = signal.SIGTERM) -> tuple[int, str]:
    process.send_signal(sig)
    async with asyncio.timeout(DEADLINE):
        _, stderr = await process.communicate()
    assert process.returncode is not None
    return process.returncode, stderr.decode()


async def test_prints_each_event_as_a_json_line_and_stops_on_sigterm() -> None:
    headers = {XFCC_HEADER: format_xfcc(make_cert("runtime-cli"))}
    async with (
        cli("--component", "lifecycle-manager", "--insecure-trust-any-xfcc") as (process, url),
        aiohttp.ClientSession() as session,
    ):
        async with session.post(
            f"{url}/v2/lifecycle-manager/event", data=BODY, headers=headers
        ) as response:
            assert response.status == 200
        assert process.stdout is not None
        line = await asyncio.wait_for(process.stdout.readline(), DEADLINE)
        event = json.loads(line)
        assert isinstance(event.pop("received_at"), float)
        assert event == {
            "runtime_id": "runtime-cli",
            "watched": {"namespace": "kyma-system", "name": "default"},
            "watched_gvk": {
                "group": "operator.kyma-project.io",
                "version": "v1beta2",
                "kind": "Kyma",
            },
        }
        code, stderr = await stop(process)
    assert code == 0
    assert "Traceback" not in stderr


async def test_v1_lines_carry_the_owner_and_sigint_stops_cleanly() -> None:
    headers = {XFCC_HEADER: format_xfcc(make_cert("runtime-cli"))}
    body = b'{"owner":{"Namespace":"kcp-system","Name":"kyma-a"},' + BODY[1:]
    async with (
        cli("--component", "lm", "--contract", "v1", "--insecure-trust-any-xfcc") as (process, url),
        aiohttp.ClientSession() as session,
    ):
        async with session.post(f"{url}/v1/lm/event", data=body, headers=headers) as response:
            assert response.status == 200
        assert process.stdout is not None
        line = await asyncio.wait_for(process.stdout.readline(), DEADLINE)
        assert json.loads(line)["owner"] == {"namespace": "kcp-system", "name": "kyma-a"}
        code, stderr = await stop(process, signal.SIGINT)
    assert code == 0
    assert "Traceback" not in stderr


async def test_direct_mtls_from_files(tls_files: TlsFiles) -> None:
    context = ssl.create_default_context(cafile=str(tls_files.ca_file))
    context.load_cert_chain(tls_files.client_chain)
    args = [
        "--component",
        "lifecycle-manager",
        "--direct-mtls",
        "--tls-cert",
        str(tls_files.server_cert),
        "--tls-key",
        str(tls_files.server_key),
        "--ca-cert",
        str(tls_files.ca_file),
    ]
    async with cli(*args) as (process, url), aiohttp.ClientSession() as session:
        assert url.startswith("https://")
        async with session.post(
            f"{url}/v2/lifecycle-manager/event", data=BODY, ssl=context
        ) as response:
            assert response.status == 200
        assert process.stdout is not None
        line = await asyncio.wait_for(process.stdout.readline(), DEADLINE)
        assert json.loads(line)["runtime_id"] == "runtime-tls"
        code, _ = await stop(process)
    assert code == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "the following arguments are required: --component"),
        (["--component", "lm", "--port", "http"], "argument --port: invalid int value"),
        (["--component", "Not_A_Label"], "component: 'Not_A_Label' is not a DNS label"),
        (["--component", "lm", "--direct-mtls"], "--direct-mtls needs --tls-cert"),
        (["--component", "lm", "--tls-cert", "a.pem"], "--tls-cert and --tls-key go together"),
        (
            [
                *("--component", "lm", "--direct-mtls", "--tls-cert", "/nonexistent/tls.crt"),
                *("--tls-key", "/nonexistent/tls.key", "--ca-cert", "/nonexistent/ca.crt"),
            ],
            "cannot read TLS certificate /nonexistent/tls.crt: No such file or directory",
        ),
        (
            ["--component", "lm", "--insecure-trust-any-xfcc", "--buffer", "-1"],
            "buffer_size must be >= 0",
        ),
    ],
)
async def test_usage_errors_are_one_line_and_exit_2(args: list[str], message: str) -> None:
    process = await asyncio.create_subprocess_exec(
        *COMMAND,
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(DEADLINE):
        stdout, stderr = await process.communicate()
    lines = stderr.decode().splitlines()
    assert process.returncode == 2
    assert stdout == b""
    assert len(lines) == 1, lines
    assert lines[0].startswith("watcher-listener: error: ")
    assert message in lines[0]


async def test_unreadable_key_file_is_a_usage_error(tmp_path: Path, tls_files: TlsFiles) -> None:
    bad_key = tmp_path / "bad.key"
    bad_key.write_text("not a key\n")
    process = await asyncio.create_subprocess_exec(
        *COMMAND,
        "--component",
        "lm",
        "--insecure-trust-any-xfcc",
        "--tls-cert",
        str(tls_files.server_cert),
        "--tls-key",
        str(bad_key),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(DEADLINE):
        _, stderr = await process.communicate()
    assert process.returncode == 2
    [line] = stderr.decode().splitlines()
    assert f"cannot load TLS certificate {tls_files.server_cert} with key {bad_key}" in line
