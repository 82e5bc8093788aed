"""The scale benchmark's Go load generator (``tools/event-load``), built with Go and cached,
against a small local HTTPS server that requires a client certificate from its CA.

Three SKR identities, round-robin: the server answers 503 to one of them, so the status
counts show which identity sent what; it records each request's certificate, body and
connection, so keep-alive and the warm-up (every identity once) show too. Skipped when no
Go toolchain is found (as the other Go programs' tests).
"""

from __future__ import annotations

import os
import ssl
import subprocess
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from aiohttp import web

from harness.bench.event_load import Identity, command, identities_json, run_event_load
from harness.bench.gatewaykit import issue_skrs, write_file
from harness.clusters import go_tools
from harness.clusters.installed_programs import find_go
from harness.clusters.ports import free_port
from harness.errors import BinaryUnavailable
from watcher import pki

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

BODY = b'{"watched":{"Namespace":"kyma-system","Name":"default"}}'
REFUSED = "runtime-0002"


@pytest.fixture(scope="module")
def event_load() -> Path:
    try:
        return go_tools.ensure_event_load()
    except BinaryUnavailable as e:
        pytest.skip(f"Go unavailable: {e}")


@dataclass
class Server:
    url: str
    ca_file: str
    ca: pki.CertificateAuthority
    seen: list[tuple[str, bytes, str, int]] = field(default_factory=list)


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[Server]:
    ca = pki.create_ca("test-ca", key_type="ec")
    serving = pki.issue_server_certificate(ca, "server", key_type="ec")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(
        write_file(tmp_path / "server.crt", serving.cert_pem),
        write_file(tmp_path / "server.key", serving.key_pem),
    )
    ca_file = write_file(tmp_path / "ca.crt", ca.cert_pem)
    context.load_verify_locations(ca_file)
    context.verify_mode = ssl.CERT_REQUIRED
    port = free_port()
    state = Server(f"https://127.0.0.1:{port}/v2/lifecycle-manager/event", ca_file, ca)

    async def event(request: web.Request) -> web.Response:
        assert request.transport is not None
        subject = request.transport.get_extra_info("peercert")["subject"]
        cn = dict(rdn[0] for rdn in subject)["commonName"]
        body = await request.read()
        state.seen.append((cn, body, request.content_type, id(request.transport)))
        return web.Response(status=503 if cn == REFUSED else 200)

    app = web.Application()
    app.router.add_post("/v2/lifecycle-manager/event", event)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port, ssl_context=context).start()
    try:
        yield state
    finally:
        await runner.cleanup()


def _files(tmp_path: Path, ca: pki.CertificateAuthority, ca_file: str, n: int) -> tuple[Path, Path]:
    certs = tmp_path / "skrs"
    certs.mkdir()
    identities = tmp_path / "identities.json"
    identities.write_text(
        identities_json([Identity(c, k, ca_file) for _, c, k in issue_skrs(ca, certs, n)])
    )
    body = tmp_path / "body.json"
    body.write_bytes(BODY)
    return identities, body


async def test_round_robin_over_identities_with_warm_up_and_keep_alive(
    event_load: Path, server: Server, tmp_path: Path
) -> None:
    identities, body = _files(tmp_path, server.ca, server.ca_file, 3)
    argv = command(
        event_load,
        url=server.url,
        identities_file=identities,
        body_file=body,
        count=9,
        in_flight=2,
        budget_s=60,
        warmup=0,  # still one per identity
        warmup_budget_s=60,
        conns_per_identity=1,
        cpu_of={"test": os.getpid()},
    )
    out = await run_event_load(argv, log_path=tmp_path / "event-load.log", within_s=120)
    assert out["warmup"]["events"] == 3 and out["warmup"]["complete"]
    assert out["warmup"]["statuses"] == {"200": 2, "503": 1}
    assert out["events"] == 9 and out["complete"] and out["requested"] == 9
    assert out["statuses"] == {"200": 6, "503": 3}
    assert out["protocols"] == {"HTTP/1.1": 9}
    assert out["identities"] == 3 and out["in_flight"] == 2 and out["procs"] == 1
    latency = out["latency_ms"]
    assert latency["count"] == 9 and 0 < latency["p50"] <= latency["p99"] <= latency["max"]
    assert out["events_per_s"] > 0 and out["seconds"] > 0
    assert out["cpu_s"] >= 0 and out["cpu_ms_per_event"] >= 0
    assert isinstance(out["cpu_of"]["test"], float | int)
    # the server saw the warm-up and the measured requests: 4 per identity, the body as is
    assert Counter(cn for cn, *_ in server.seen) == {f"runtime-000{i}": 4 for i in range(3)}
    assert {(body, content_type) for _, body, content_type, _ in server.seen} == {
        (BODY, "application/json")
    }
    # keep-alive: one connection per identity (at most 1 each), reused for all four
    assert len({connection for *_, connection in server.seen}) == 3


async def test_a_certificate_from_another_ca_gets_no_answer(
    event_load: Path, server: Server, tmp_path: Path
) -> None:
    stranger = pki.create_ca("stranger-ca", key_type="ec")
    identities, body = _files(tmp_path, stranger, server.ca_file, 1)
    argv = command(
        event_load,
        url=server.url,
        identities_file=identities,
        body_file=body,
        count=2,
        in_flight=1,
        budget_s=60,
        warmup=0,
        warmup_budget_s=60,
        conns_per_identity=1,
    )
    out = await run_event_load(argv, log_path=tmp_path / "event-load.log", within_s=120)
    assert out["events"] == 0 and out["complete"]
    assert out["statuses"] == {"error": 2} and out["latency_ms"] == {"count": 0}
    assert out["warmup"]["statuses"] == {"error": 1}
    assert out["error_sample"].startswith(f'Post "{server.url}"')  # TLS 1.3: a reset or alert
    assert server.seen == []


def test_bad_input_is_refused_with_a_message(event_load: Path, tmp_path: Path) -> None:
    body = tmp_path / "body.json"
    body.write_bytes(BODY)
    base = [str(event_load), "-url", "https://127.0.0.1:1/", "-body", str(body), "-count", "1"]
    for extra, message in [
        (["-identities", str(tmp_path / "missing.json")], "-identities: open"),
        (["-identities", str(body)], "want a JSON list"),
        (["-identities", str(body), "-count", "0"], "-count must be in 1..10000000"),
    ]:
        run = subprocess.run(base + extra, capture_output=True, text=True, timeout=30, check=False)
        assert run.returncode == 2 and run.stdout == ""
        assert message in run.stderr, run.stderr


def test_go_unit_tests_pass(event_load: Path) -> None:
    go = find_go(needed_for="tools/event-load's tests")
    run = subprocess.run(
        [str(go), "test", "./..."],
        cwd=go_tools.EVENT_LOAD_DIR,
        env=dict(os.environ, CGO_ENABLED="0"),
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr
