"""The durable spool: journal, replay after a crash, torn lines, compaction, overflow, lock.

Unit tests drive :class:`Spool` directly; the delivery tests run an in-process webhook
against the mTLS KCP stand-in; the loopback test runs ``watcher-webhook`` as a real
process, SIGKILLs it with events queued and checks the restarted process delivers each
of them exactly once.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sys
import textwrap
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from webhook_helpers import FakeKcp, MakeWebhook, Pki, create, event_body, eventually

from watcher.errors import ConfigError
from watcher.webhook.settings import load_settings
from watcher.webhook.spool import Spool, SpoolLockedError

PATH = "/v2/lifecycle-manager/event"
SCRIPT = Path(sys.executable).with_name("watcher-webhook")
ARGV = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "watcher.webhook.server"]
OUR_VARS = re.compile(r"^(CA_CERT|TLS_CERT|TLS_KEY|KCP_|WEBHOOK_|METRICS_|WATCHER_)")


def segments(directory: Path) -> list[Path]:
    return sorted(directory.glob("segment-*.jsonl"))


def message(answer: Any) -> str:
    return str(answer.json["response"]["status"]["message"])


# ------------------------------------------------------------------ the journal


def test_unacknowledged_events_survive_a_reopen_in_order(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    assert spool.open() == []
    ids = [spool.append(PATH, event_body(f"k{i}")) for i in range(5)]
    spool.ack(ids[1])
    spool.ack(ids[3])
    spool.close()  # no compaction, no goodbye: what a kill leaves behind
    again = Spool(tmp_path)
    records = again.open()
    assert [r.id for r in records] == [ids[0], ids[2], ids[4]]
    assert [r.body for r in records] == [event_body("k0"), event_body("k2"), event_body("k4")]
    assert {r.path for r in records} == {PATH}
    assert again.append(PATH, b"{}") == ids[-1] + 1  # ids keep growing across restarts
    assert again.live == 4 and again.corrupt_lines == 0
    again.close()


def test_torn_trailing_line_and_garbage_are_skipped_and_counted(tmp_path: Path) -> None:
    spool = Spool(tmp_path)
    spool.open()
    first = spool.append(PATH, event_body("a"))
    spool.close()
    segment = segments(tmp_path)[-1]
    with segment.open("ab") as f:
        f.write(b"not json\n")
        f.write(b'{"op":"add","id":"x"}\n')
        f.write(b"[1,2]\n")
        f.write(b'{"op":"add","id":9,"t":1.0,"path":"/v2/lifecycle-manager/event","bo')
    again = Spool(tmp_path)
    records = again.open()
    assert [r.id for r in records] == [first]
    assert again.corrupt_lines == 4
    # The torn line is never appended to: the next record starts a clean segment.
    after = again.append(PATH, event_body("b"))
    again.close()
    third = Spool(tmp_path)
    assert [r.id for r in third.open()] == [first, after]
    assert third.corrupt_lines == 0
    third.close()


def test_compaction_keeps_one_bounded_segment_and_the_live_events(tmp_path: Path) -> None:
    spool = Spool(tmp_path, segment_bytes=2048)
    spool.open()
    keep = spool.append(PATH, event_body("pinned"))  # never acknowledged
    for i in range(500):
        spool.ack(spool.append(PATH, event_body(f"k{i}")))
        assert spool.size_bytes < 2048 + 512
    assert spool.compactions >= 20
    assert len(segments(tmp_path)) == 1
    assert segments(tmp_path)[0].stat().st_size == spool.size_bytes
    spool.close()
    again = Spool(tmp_path)
    assert [(r.id, r.body) for r in again.open()] == [(keep, event_body("pinned"))]
    again.close()


def test_second_owner_gets_a_clear_error_and_a_dead_owner_releases(tmp_path: Path) -> None:
    owner = Spool(tmp_path)
    owner.open()
    with pytest.raises(SpoolLockedError, match=rf"in use by another process \(pid {os.getpid()}\)"):
        Spool(tmp_path).open()
    owner.close()
    second = Spool(tmp_path)
    second.open()
    second.close()


WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from watcher.webhook.spool import Spool
    spool = Spool(Path(sys.argv[1]), segment_bytes=4096)
    spool.open()
    i = 0
    while True:
        rid = spool.append("/v2/m/event", b'{"n":%d}' % i)
        if i % 3 == 0:
            spool.ack(rid)
        print(rid, i % 3 == 0, flush=True)
        i += 1
    """
)


async def test_sigkill_mid_stream_loses_no_acknowledged_write(tmp_path: Path) -> None:
    """A writer appending as fast as it can is SIGKILLed; every append it reported survives."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", WRITER, str(tmp_path), stdout=asyncio.subprocess.PIPE
    )
    assert proc.stdout is not None
    reported: dict[int, bool] = {}
    try:
        while len(reported) < 3000:
            line = await asyncio.wait_for(proc.stdout.readline(), 20)
            assert line, "writer exited early"
            rid, acked = line.split()
            reported[int(rid)] = acked == b"True"
    finally:
        proc.kill()
        # Drain what the writer left in the pipe: asyncio pauses reading a full pipe, and a
        # paused pipe never sees EOF, so a bare wait() could hang after the kill.
        await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == -signal.SIGKILL
    spool = Spool(tmp_path)  # the dead writer's lock is gone: no manual step
    replayed = {r.id for r in spool.open()}
    spool.close()
    assert spool.corrupt_lines <= 1  # at most the line the kill tore
    assert {rid for rid, acked in reported.items() if not acked} <= replayed
    assert not {rid for rid, acked in reported.items() if acked} & replayed


def test_spool_settings(tmp_path: Path, pki: Pki) -> None:
    files = {
        "CA_CERT": str(pki.files.ca_cert),
        "TLS_CERT": str(pki.files.tls_cert),
        "TLS_KEY": str(pki.files.tls_key),
    }
    assert load_settings(files).delivery.spool_dir is None
    on = load_settings(files | {"WATCHER_SPOOL_DIR": str(tmp_path), "WATCHER_SPOOL_FSYNC": "true"})
    assert (on.delivery.spool_dir, on.delivery.spool_fsync) == (tmp_path, True)
    with pytest.raises(ConfigError, match="WATCHER_SPOOL_FSYNC"):
        load_settings(files | {"WATCHER_SPOOL_FSYNC": "maybe"})
    with pytest.raises(ConfigError, match="WATCHER_SPOOL_DIR"):
        load_settings(files | {"WATCHER_SPOOL_DIR": str(pki.files.ca_cert)})


# ------------------------------------------------------------------ with delivery


async def test_shutdown_keeps_undelivered_events_for_the_next_start(
    make_webhook: MakeWebhook, api_server: Any, kcp: FakeKcp, tmp_path: Path
) -> None:
    spool_dir = tmp_path / "spool"
    first = await make_webhook(workers=1, spool_dir=spool_dir, drain_timeout=0.3)
    kcp.hold()
    for name in "abc":
        assert message(await api_server(first, create(name))) == "kcp request queued"
    assert message(await api_server(first, create("b"))) == "kcp request queued"  # coalesced
    await eventually(lambda: kcp.in_flight == 1)
    assert first.metrics.value("watcher_spool_events") == 3
    report = await first.stop()
    assert report is not None and (report.left, report.kept) == (3, 3)
    assert first.metrics.value("watcher_events_dropped_total", {"reason": "shutdown"}) == 0
    kcp.release()
    second = await make_webhook(workers=1, spool_dir=spool_dir)
    assert second.metrics.value("watcher_spool_replayed_total") == 3
    await eventually(lambda: second.metrics.value("watcher_spool_events") == 0, what="acks")
    # "a" was in flight when the first process gave up on it: at least once, so it may
    # arrive twice; b and c were only queued and arrive once.
    received = Counter(kcp.bodies())
    assert set(received) == {event_body(n) for n in "abc"}
    assert received[event_body("b")] == received[event_body("c")] == 1


async def test_overflow_acknowledges_what_the_queue_drops(
    make_webhook: MakeWebhook, api_server: Any, kcp: FakeKcp, tmp_path: Path
) -> None:
    spool_dir = tmp_path / "spool"
    hook = await make_webhook(workers=1, queue_size=2, spool_dir=spool_dir, drain_timeout=0.2)
    kcp.hold()
    await api_server(hook, create("a"))
    await eventually(lambda: kcp.in_flight == 1)
    for name in "bcd":
        await api_server(hook, create(name))
    assert hook.metrics.value("watcher_events_dropped_total", {"reason": "overflow"}) == 1
    # Bounded like the queue: capacity 2 queued + 1 held by the worker.
    assert hook.metrics.value("watcher_spool_events") == 3
    await hook.stop()
    spool = Spool(spool_dir)
    assert [r.body for r in spool.open()] == [event_body(n) for n in "acd"]
    spool.close()


async def test_reject_newest_never_journals_the_rejected_event(
    make_webhook: MakeWebhook, api_server: Any, kcp: FakeKcp, tmp_path: Path
) -> None:
    spool_dir = tmp_path / "spool"
    hook = await make_webhook(
        workers=1,
        queue_size=1,
        overflow_policy="reject-newest",
        spool_dir=spool_dir,
        drain_timeout=0.2,
    )
    kcp.hold()
    await api_server(hook, create("a"))
    await eventually(lambda: kcp.in_flight == 1)
    await api_server(hook, create("b"))
    answer = await api_server(hook, create("c"))
    assert message(answer) == "kcp request failed: delivery queue is full"
    await hook.stop()
    spool = Spool(spool_dir)
    assert [r.body for r in spool.open()] == [event_body("a"), event_body("b")]
    spool.close()


async def test_fsync_mode_shares_fsyncs_among_concurrent_admissions(
    make_webhook: MakeWebhook, api_server: Any, kcp: FakeKcp, tmp_path: Path
) -> None:
    hook = await make_webhook(spool_dir=tmp_path / "spool", spool_fsync=True)
    answers = await asyncio.gather(*(api_server(hook, create(f"k{i}")) for i in range(20)))
    assert {message(a) for a in answers} == {"kcp request queued"}
    assert hook.delivery is not None and hook.delivery.spool is not None
    group = hook.delivery._group_sync
    assert group is not None
    assert 1 <= group.fsyncs <= 20
    await eventually(lambda: len(kcp.received) == 20, what="delivery")
    await eventually(lambda: hook.metrics.value("watcher_spool_events") == 0, what="acks")


async def test_replay_honours_max_event_age(
    make_webhook: MakeWebhook, kcp: FakeKcp, tmp_path: Path
) -> None:
    spool_dir = tmp_path / "spool"
    old = Spool(spool_dir, wall=lambda: 0.0)  # written in 1970: far older than any age limit
    old.open()
    old.append(PATH, event_body("stale"))
    old.close()
    hook = await make_webhook(spool_dir=spool_dir, max_event_age=30.0)
    await eventually(
        lambda: hook.metrics.value("watcher_events_dropped_total", {"reason": "expired"}) == 1
    )
    assert hook.metrics.value("watcher_spool_events") == 0
    assert kcp.received == []


# ------------------------------------------------------------------ the real process


def process_env(pki: Pki, kcp: FakeKcp, spool_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not OUR_VARS.match(k)}
    return env | {
        "CA_CERT": str(pki.files.ca_cert),
        "TLS_CERT": str(pki.files.tls_cert),
        "TLS_KEY": str(pki.files.tls_key),
        "WEBHOOK_HOST": "127.0.0.1",
        "WEBHOOK_PORT": "0",
        "METRICS_HOST": "127.0.0.1",
        "METRICS_PORT": "0",
        "KCP_ADDR": kcp.addr,
        "KCP_CONTRACT": "v2",
        "WATCHER_WORKERS": "2",
        "WATCHER_RETRY_BASE_SECONDS": "0.05",
        "WATCHER_RETRY_MAX_SECONDS": "0.2",
        "WATCHER_SPOOL_DIR": str(spool_dir),
    }


class Running:
    """One ``watcher-webhook`` process started in its own session (killable as a group)."""

    def __init__(self, proc: asyncio.subprocess.Process, port: int, metrics_port: int) -> None:
        self.proc = proc
        self.url = f"https://127.0.0.1:{port}/validate/lifecycle-manager"
        self.metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"

    @classmethod
    async def start(cls, env: dict[str, str]) -> Running:
        proc = await asyncio.create_subprocess_exec(
            *ARGV,
            env=env,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        assert proc.stderr is not None
        try:
            async with asyncio.timeout(20):
                while True:
                    line = (await proc.stderr.readline()).decode()
                    assert line, f"webhook exited early ({await proc.wait()})"
                    msg = json.loads(line)["msg"]
                    if msg.startswith("webhook listening on"):
                        port, metrics_port = re.findall(r"127\.0\.0\.1:(\d+)", msg)[:2]
                        return cls(proc, int(port), int(metrics_port))
        except BaseException:
            await cls(proc, 0, 0).kill()
            raise

    async def kill(self) -> None:
        if self.proc.returncode is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        await self.proc.wait()

    async def metric(self, session: aiohttp.ClientSession, name: str) -> float:
        async with session.get(self.metrics_url) as resp:
            text = await resp.text()
        match = re.search(rf"^{name} (\S+)$", text, re.MULTILINE)
        assert match, f"{name} not in /metrics"
        return float(match.group(1))


async def test_sigkilled_webhook_delivers_every_spooled_event_exactly_once_after_restart(
    pki: Pki, kcp: FakeKcp, tmp_path: Path
) -> None:
    spool_dir = tmp_path / "spool"
    env = process_env(pki, kcp, spool_dir)
    await kcp.stop()  # the KCP is down: every event stays queued (retrying)
    names = [f"kyma-{i}" for i in range(10)]
    first = await Running.start(env)
    second: Running | None = None
    try:
        async with aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=pki.trust_all())
        ) as session:
            for name in names + names[:5]:  # 15 admissions, 10 distinct events
                async with session.post(first.url, json=create(name)) as resp:
                    answer = await resp.json()
                assert answer["response"]["status"]["message"] == "kcp request queued"
            assert await first.metric(session, "watcher_spool_events") == 10
            assert await first.metric(session, "watcher_events_delivered_total") == 0
            await first.kill()
            assert first.proc.returncode == -signal.SIGKILL
            await kcp.start()  # same port
            second = await Running.start(env)
            expected = {event_body(n) for n in names}
            await eventually(lambda: set(kcp.bodies()) == expected, within=10, what="replay")
            await asyncio.sleep(0.5)  # room for a duplicate to show up
            assert Counter(kcp.bodies()) == Counter(expected)
            assert await second.metric(session, "watcher_spool_replayed_total") == 10
            assert await second.metric(session, "watcher_spool_events") == 0
            assert await second.metric(session, "watcher_spool_corrupt_lines_total") == 0
    finally:
        await first.kill()
        if second is not None:
            await second.kill()


async def test_second_process_on_the_same_spool_exits_with_one_line(
    pki: Pki, kcp: FakeKcp, tmp_path: Path
) -> None:
    env = process_env(pki, kcp, tmp_path / "spool")
    first = await Running.start(env)
    try:
        proc = await asyncio.create_subprocess_exec(
            *ARGV, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        _, err = await asyncio.wait_for(proc.communicate(), 30)
        lines = err.decode().splitlines()
        assert proc.returncode == 2
        assert len(lines) == 1
        assert lines[0].startswith("watcher-webhook: spool error: spool directory ")
        assert f"in use by another process (pid {first.proc.pid})" in lines[0]
    finally:
        await first.kill()


async def test_a_failing_journal_write_keeps_the_event_in_memory(
    make_webhook: MakeWebhook,
    api_server: Any,
    kcp: FakeKcp,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hook = await make_webhook(spool_dir=tmp_path / "spool")
    assert hook.spool is not None

    def disk_full(path: str, body: bytes) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(hook.spool, "append", disk_full)
    answer = await api_server(hook, create("kyma-1"))
    assert message(answer) == "kcp request queued"
    assert answer.json["response"]["allowed"] is True
    await eventually(lambda: kcp.bodies() == [event_body()], what="delivery from memory")
    assert hook.metrics.value("watcher_spool_errors_total") == 1
