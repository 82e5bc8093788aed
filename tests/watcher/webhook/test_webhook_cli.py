"""``watcher-webhook`` as a real process: config errors, a full start, SIGTERM."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sys
from pathlib import Path
from typing import Any

import aiohttp
from webhook_helpers import FakeKcp, Pki, create, event_body, eventually

SCRIPT = Path(sys.executable).with_name("watcher-webhook")
ARGV = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "watcher.webhook.server"]
OUR_VARS = re.compile(r"^(CA_CERT|TLS_CERT|TLS_KEY|KCP_|WEBHOOK_|METRICS_|WATCHER_)")


def base_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not OUR_VARS.match(k)}
    return env | extra


def files_env(pki: Pki) -> dict[str, str]:
    return {
        "CA_CERT": str(pki.files.ca_cert),
        "TLS_CERT": str(pki.files.tls_cert),
        "TLS_KEY": str(pki.files.tls_key),
        "WEBHOOK_HOST": "127.0.0.1",
        "WEBHOOK_PORT": "0",
        "METRICS_HOST": "127.0.0.1",
        "METRICS_PORT": "0",
    }


async def run_to_exit(env: dict[str, str]) -> tuple[int, list[str]]:
    proc = await asyncio.create_subprocess_exec(
        *ARGV, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    _, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode is not None
    return proc.returncode, err.decode().splitlines()


async def test_missing_ca_cert_is_one_line_without_traceback(pki: Pki) -> None:
    env = base_env(**files_env(pki))
    del env["CA_CERT"]
    code, lines = await run_to_exit(env)
    assert code == 2
    assert lines == [
        "watcher-webhook: configuration error: CA_CERT is not set: expected the path of a PEM file"
    ]


async def test_invalid_value_and_broken_certificate(pki: Pki) -> None:
    code, lines = await run_to_exit(base_env(**files_env(pki), WATCHER_QUEUE_SIZE="many"))
    assert code == 2 and len(lines) == 1 and "WATCHER_QUEUE_SIZE" in lines[0]
    pki.files.tls_cert.write_text("not a certificate")
    code, lines = await run_to_exit(base_env(**files_env(pki)))
    assert code == 2 and len(lines) == 1
    assert lines[0].startswith("watcher-webhook: certificate error:")
    assert "Traceback" not in lines[0]


async def test_full_start_admission_and_sigterm(pki: Pki, kcp: FakeKcp) -> None:
    env = base_env(
        **files_env(pki), KCP_ADDR=kcp.addr, KCP_CONTRACT="v2", WATCHER_DELIVERY_MODE="sync"
    )
    proc = await asyncio.create_subprocess_exec(
        *ARGV,
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    assert proc.stderr is not None
    log: list[str] = []
    try:
        started: dict[str, Any] = {}
        async with asyncio.timeout(20):
            while "msg" not in started:
                line = (await proc.stderr.readline()).decode()
                assert line, f"webhook exited early ({await proc.wait()}): {log}"
                log.append(line)
                record = json.loads(line)
                if record["msg"].startswith("webhook listening on"):
                    started = record
        port, metrics_port = re.findall(r"127\.0\.0\.1:(\d+)", started["msg"])[:2]
        ctx = pki.trust_all()
        async with aiohttp.ClientSession() as session:
            url = f"https://127.0.0.1:{port}/validate/lifecycle-manager"
            async with session.post(url, json=create("kyma-1"), ssl=ctx) as resp:
                assert resp.status == 200
                assert resp.headers["Content-Security-Policy"] == "default-src 'self'"
                assert "Server" not in resp.headers  # no versions named, as upstream
                answer = await resp.json()
            assert answer["response"]["status"]["message"] == "kcp request succeeded"
            await eventually(lambda: kcp.bodies() == [event_body()])
            metrics_url = f"http://127.0.0.1:{metrics_port}"
            async with session.get(metrics_url + "/metrics") as resp:
                text = await resp.text()
                assert "Server" not in resp.headers
            assert "watcher_admission_request_total 1.0" in text
            assert "watcher_kcp_requests_total 1.0" in text
            # what upstream's /metrics shows besides, and not what it does not
            assert "watcher_fips_mode 0.0" in text
            assert "process_resident_memory_bytes " in text
            assert "_created" not in text
            async with session.get(metrics_url + "/readyz") as resp:
                assert resp.status == 200
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 15) == 0
        rest = (await proc.stderr.read()).decode().splitlines()
        assert all(json.loads(line)["level"] in ("info", "warning") for line in rest)
        assert not any("Traceback" in line for line in rest)
    finally:
        if proc.returncode is None:
            os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
