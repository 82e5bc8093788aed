"""ListenerProcess: a listener process on the same ports across restarts, its stdout
event lines to one callback, its metrics summed over incarnations.

A small Python stand-in speaks the wrapper's interface (``--component --host --port
--metrics-port``; 405 on a GET of the event path; one JSON event line per POST; upstream's
``watcher_listener_requests_total``), so this runs without Go. The real Go program runs in
``test_upstream_listener_e2e.py`` and ``scenarios/upstream-listener.yaml``.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import aiohttp
import pytest

from harness.clusters import procfs
from harness.errors import ProcessExitedEarly
from harness.kcp.listener_process import (
    ListenerProcess,
    ListenerProcessError,
    ListenerTls,
    ours_command,
    upstream_command,
    without_listener_settings,
)
from watcher import pki
from watcher.listener import XFCC_HEADER, ListenerEvent, format_xfcc

STAND_IN = """
import argparse, json, sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

p = argparse.ArgumentParser()
for flag in ("--component", "--host", "--port", "--metrics-port"):
    p.add_argument(flag)
a = p.parse_args()
if a.component == "crash":
    sys.exit("cannot start")
path, requests = f"/v2/{a.component}/event", [0]

class Events(BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(405 if self.path == path else 404); self.end_headers()
    def do_POST(self):
        requests[0] += 1
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        w, g = body["watched"], body["watchedGvk"]
        line = {"runtime_id": self.headers["X-Runtime"],
                "watched": {"namespace": w["Namespace"], "name": w["Name"]},
                "watched_gvk": g, "received_at": time.time()}
        print("not an event line", flush=True)
        print(json.dumps(line), flush=True)
        self.send_response(200); self.end_headers()
    def log_message(self, *args): pass

class Metrics(BaseHTTPRequestHandler):
    def do_GET(self):
        text = f'watcher_listener_requests_total{{server_name="listener"}} {requests[0]}\\n'
        self.send_response(200); self.end_headers(); self.wfile.write(text.encode())
    def log_message(self, *args): pass

metrics = ThreadingHTTPServer((a.host, int(a.metrics_port)), Metrics)
threading.Thread(target=metrics.serve_forever, daemon=True).start()
ThreadingHTTPServer((a.host, int(a.port)), Events).serve_forever()
"""

BODY = (
    b'{"watched":{"Namespace":"kyma-system","Name":"default"},'
    b'"watchedGvk":{"group":"operator.kyma-project.io","version":"v1beta2","kind":"Kyma"}}'
)


@pytest.fixture
def binary(tmp_path: Path) -> Path:
    script = tmp_path / "stand-in.py"
    script.write_text(STAND_IN)
    launcher = tmp_path / "upstream-listener"
    launcher.write_text(f'#!/bin/sh\nexec {sys.executable} {script} "$@"\n')
    launcher.chmod(0o755)
    return launcher


async def post(session: aiohttp.ClientSession, url: str, runtime: str) -> int:
    async with session.post(url, data=BODY, headers={"X-Runtime": runtime}) as resp:
        return resp.status


async def test_restart_keeps_ports_events_and_counters(
    binary: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    got: list[ListenerEvent] = []

    async def take(event: ListenerEvent) -> None:
        got.append(event)

    listener = ListenerProcess(
        "probe", take, command=upstream_command(binary), log_path=tmp_path / "l.log"
    )
    async with listener, aiohttp.ClientSession() as session:
        assert listener.url.startswith("http://127.0.0.1:")
        port, url = listener.port, listener.event_url
        assert await post(session, url, "runtime-a") == 200
        await listener.stop()
        assert not listener.running
        with pytest.raises(aiohttp.ClientConnectionError):
            await post(session, url, "runtime-a")
        await listener.start()
        assert listener.port == port
        assert await post(session, url, "runtime-b") == 200
        with pytest.raises(ListenerProcessError, match="already running"):
            await listener.start()
        async with asyncio.timeout(5):
            while len(got) < 2:
                await asyncio.sleep(0.02)
        total = await listener.read_metric("watcher_listener_requests_total")
    assert [(e.runtime_id, e.event.watched.name, e.event.watched_gvk.kind) for e in got] == [
        ("runtime-a", "default", "Kyma"),
        ("runtime-b", "default", "Kyma"),
    ]
    assert total == 2  # one request per incarnation, summed
    assert listener.samples("watcher_listener_requests_total") == {
        (("server_name", "listener"),): 2.0
    }
    assert (listener.consumed, listener.callback_errors) == (2, 0)
    skipped = [r for r in caplog.records if "not an event line" in r.getMessage()]
    assert len(skipped) == 2  # a stray stdout line is skipped and named, not fatal


async def test_a_failing_callback_is_counted_and_the_next_event_taken(
    binary: Path, tmp_path: Path
) -> None:
    calls: list[str] = []

    async def flaky(event: ListenerEvent) -> None:
        calls.append(event.runtime_id)
        if len(calls) == 1:
            raise RuntimeError("consumer bug")

    listener = ListenerProcess(
        "probe", flaky, command=upstream_command(binary), log_path=tmp_path / "l.log"
    )
    async with listener, aiohttp.ClientSession() as session:
        for runtime in ("runtime-a", "runtime-b"):
            assert await post(session, listener.event_url, runtime) == 200
        async with asyncio.timeout(5):
            while len(calls) < 2:
                await asyncio.sleep(0.02)
    assert calls == ["runtime-a", "runtime-b"]
    assert listener.callback_errors == 1


async def test_a_program_that_exits_at_start_is_reported_with_its_log(
    binary: Path, tmp_path: Path
) -> None:
    async def take(event: ListenerEvent) -> None:
        raise AssertionError("no event expected")

    listener = ListenerProcess(
        "crash", take, command=upstream_command(binary), log_path=tmp_path / "l.log"
    )
    with pytest.raises(ProcessExitedEarly, match="cannot start"):
        async with listener:
            pass
    assert not listener.running


def test_ours_command_is_plain_http_believing_xfcc_or_mtls_believing_the_gateway() -> None:
    plain = ours_command()("config-manager", 4100, 4101)
    assert Path(plain[0]).name == "watcher-listener"
    assert plain[1:] == [
        *("--component", "config-manager", "--host", "127.0.0.1", "--port", "4100"),
        "--insecure-trust-any-xfcc",
    ]
    tls = ListenerTls(Path("c.pem"), Path("k.pem"), Path("ca.pem"))
    assert ours_command(tls)("m", 1, 2)[-6:] == [
        *("--tls-cert", "c.pem", "--tls-key", "k.pem", "--gateway-ca", "ca.pem"),
    ]
    env = {"PATH": "/bin", "WATCHER_LISTENER_INSECURE_TRUST_ANY_XFCC": "true"}
    assert without_listener_settings(env) == {"PATH": "/bin"}


async def test_our_listener_as_a_process_hands_over_the_events_it_accepts(tmp_path: Path) -> None:
    """How the soak runs ``config-manager``'s listener when the mesh is off."""
    got: list[ListenerEvent] = []

    async def take(event: ListenerEvent) -> None:
        got.append(event)

    ca = pki.create_ca(key_type="ec")
    xfcc = format_xfcc(pki.issue(ca, "runtime-a", key_type="ec").certificate)
    listener = ListenerProcess(
        "config-manager",
        take,
        command=ours_command(),
        log_path=tmp_path / "l.log",
        implementation="ours",
        metrics_on_own_port=False,
        env=without_listener_settings(os.environ),
    )
    async with listener, aiohttp.ClientSession() as session:
        headers = {XFCC_HEADER: xfcc, "Content-Type": "application/json"}
        async with session.post(listener.event_url, data=BODY, headers=headers) as resp:
            assert resp.status == 200
        async with asyncio.timeout(5):
            while not got:
                await asyncio.sleep(0.02)
        pid = listener.pid
    assert [(e.runtime_id, e.event.watched.name) for e in got] == [("runtime-a", "default")]
    assert pid is not None and not procfs.is_alive(pid)


async def test_our_listener_serving_mtls_is_ready_once_its_port_accepts(tmp_path: Path) -> None:
    """Behind the mesh a GET needs the gateway's certificate: readiness is a TCP connect,
    and stopping still ends the process (its group)."""
    ca = pki.create_ca(key_type="ec")
    serving = pki.issue_server_certificate(ca, "config-manager", key_type="ec")
    files = pki.write_secret_files(
        tmp_path,
        {"tls.crt": serving.cert_pem, "tls.key": serving.key_pem, "ca.crt": ca.cert_pem},
    )
    tls = ListenerTls(files["tls.crt"], files["tls.key"], files["ca.crt"])

    async def take(event: ListenerEvent) -> None:
        raise AssertionError("no event expected")

    listener = ListenerProcess(
        "config-manager",
        take,
        command=ours_command(tls),
        log_path=tmp_path / "l.log",
        implementation="ours",
        metrics_on_own_port=False,
        serves_tls=True,
    )
    async with listener:
        assert listener.url.startswith("https://127.0.0.1:")
        pid = listener.pid
        assert pid is not None and procfs.is_alive(pid)
        assert await listener.read_metric("watcher_listener_requests_total") == 0
    assert not procfs.is_alive(pid)
