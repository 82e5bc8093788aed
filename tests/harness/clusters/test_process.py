"""OwnedProcess with real tiny child processes: readiness, failures, stop, cleanup."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from harness.clusters import procfs
from harness.clusters.process import NotReady, OwnedProcess, log_tail, owned_process_groups
from harness.errors import ProcessExitedEarly, ProcessNotReady

# A child that becomes "ready" by creating a file, optionally spawns a grandchild that
# writes its pid to a file, and then idles until signalled.
CHILD = textwrap.dedent(
    """
    import os, signal, subprocess, sys, time
    ready_file, mode = sys.argv[1], sys.argv[2]
    if "ignore-term" in mode:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if "grandchild" in mode:
        code = "import signal, time\\n"
        if "grandchild-ignores" in mode:
            code += "signal.signal(signal.SIGTERM, signal.SIG_IGN)\\n"
        code += "open(%r, 'w').write('x')\\nwhile True: time.sleep(0.1)" % (ready_file + ".gc",)
        gc = subprocess.Popen([sys.executable, "-c", code])
        open(ready_file + ".gcpid", "w").write(str(gc.pid))
        while not os.path.exists(ready_file + ".gc"):
            time.sleep(0.01)
    print("child starting", flush=True)
    if "fail" in mode:
        print("boom: cannot bind", flush=True)
        sys.exit(3)
    if "never-ready" not in mode:
        open(ready_file, "w").write("ready")
    while True:
        time.sleep(0.1)
    """
)


def owned(
    tmp_path: Path, mode: str = "", *, ready_timeout: float = 20.0, stop_timeout: float = 10.0
) -> OwnedProcess:
    ready_file = tmp_path / "ready"

    async def probe() -> bool:
        return ready_file.exists()

    return OwnedProcess(
        "child",
        [sys.executable, "-c", CHILD, str(ready_file), mode],
        log_path=tmp_path / "logs" / "child.log",
        probe=probe,
        ready_timeout=ready_timeout,
        stop_timeout=stop_timeout,
    )


def grandchild_pid(tmp_path: Path) -> int:
    return int((tmp_path / "ready.gcpid").read_text())


async def wait_gone(pid: int, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while procfs.is_alive(pid):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True


async def test_ready_then_stop_records_everything(tmp_path: Path) -> None:
    async with owned(tmp_path) as proc:
        pid = proc.pid
        assert pid is not None and procfs.is_alive(pid)
        assert pid in owned_process_groups()
        assert proc.record.ready_after is not None and proc.record.ready_after > 0
        assert proc.rss_bytes() is not None
    assert not procfs.is_alive(pid)
    assert pid not in owned_process_groups()
    assert proc.record.exit_code == -signal.SIGTERM
    assert proc.record.stop_signal == "SIGTERM"
    assert proc.record.argv[0] == sys.executable
    assert "child starting" in log_tail(proc.record.log_path)


async def test_early_exit_raises_at_once_with_exit_code_and_log_tail(tmp_path: Path) -> None:
    proc = owned(tmp_path, "fail", ready_timeout=30.0)
    started = time.monotonic()
    with pytest.raises(ProcessExitedEarly) as caught:
        async with proc:
            pytest.fail("must not become ready")
    assert time.monotonic() - started < 10, "early exit must not wait for the deadline"
    message = str(caught.value)
    assert "child exited with code 3 before it was ready" in message
    assert "boom: cannot bind" in message
    assert str(proc.record.log_path) in message
    assert proc.record.exit_code == 3


async def test_deadline_raises_with_last_probe_reason_and_stops(tmp_path: Path) -> None:
    async def probe() -> bool:
        raise NotReady("still waiting for the moon")

    proc = OwnedProcess(
        "child",
        [sys.executable, "-c", CHILD, str(tmp_path / "ready"), "never-ready"],
        log_path=tmp_path / "child.log",
        probe=probe,
        ready_timeout=0.5,
    )
    with pytest.raises(ProcessNotReady) as caught:
        async with proc:
            pytest.fail("must not become ready")
    message = str(caught.value)
    assert "child not ready after 0.5 s" in message
    assert "still waiting for the moon" in message
    assert "child starting" in message and str(tmp_path / "child.log") in message
    assert isinstance(caught.value, TimeoutError)
    assert proc.pid is not None and not procfs.is_alive(proc.pid)


async def test_connection_errors_count_as_not_ready(tmp_path: Path) -> None:
    calls = 0

    async def probe() -> bool:
        nonlocal calls
        calls += 1
        if calls < 3:
            raise ConnectionRefusedError(111, "Connection refused")
        return True

    proc = OwnedProcess(
        "child",
        [sys.executable, "-c", CHILD, str(tmp_path / "ready"), ""],
        log_path=tmp_path / "child.log",
        probe=probe,
    )
    async with proc:
        assert calls == 3


async def test_stop_kills_the_whole_process_group(tmp_path: Path) -> None:
    async with owned(tmp_path, "grandchild") as proc:
        gc = grandchild_pid(tmp_path)
        assert procfs.is_alive(gc)
        assert proc.pid is not None and gc in procfs.group_members(proc.pid)
    assert await wait_gone(gc, within=0.5), "stop returns only when the group is gone"


async def test_stop_escalates_to_sigkill(tmp_path: Path) -> None:
    async with owned(tmp_path, "ignore-term grandchild", stop_timeout=0.5) as proc:
        gc = grandchild_pid(tmp_path)
    assert proc.record.stop_signal == "SIGKILL"
    assert proc.record.exit_code == -signal.SIGKILL
    assert not procfs.is_alive(gc)


async def test_members_left_behind_by_the_leader_are_killed(tmp_path: Path) -> None:
    async with owned(tmp_path, "grandchild grandchild-ignores", stop_timeout=0.5) as proc:
        gc = grandchild_pid(tmp_path)
    assert proc.record.exit_code == -signal.SIGTERM  # the leader obeyed
    assert not procfs.is_alive(gc)  # the member that ignored SIGTERM got SIGKILL
    assert proc.record.stop_signal == "SIGKILL"


async def test_exception_in_body_stops_the_process(tmp_path: Path) -> None:
    pid = None
    with pytest.raises(RuntimeError, match="test failed"):
        async with owned(tmp_path, "grandchild") as proc:
            pid, gc = proc.pid, grandchild_pid(tmp_path)
            raise RuntimeError("test failed")
    assert pid is not None and not procfs.is_alive(pid) and not procfs.is_alive(gc)


async def test_cancellation_stops_the_process(tmp_path: Path) -> None:
    ready = asyncio.Event()
    pids: list[int] = []

    async def user() -> None:
        async with owned(tmp_path, "grandchild") as proc:
            assert proc.pid is not None
            pids.extend([proc.pid, grandchild_pid(tmp_path)])
            ready.set()
            await asyncio.Event().wait()

    task = asyncio.create_task(user())
    await ready.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert pids and not any(procfs.is_alive(p) for p in pids)


async def test_cancellation_during_readiness_stops_the_process(tmp_path: Path) -> None:
    probed = asyncio.Event()

    async def probe() -> bool:
        probed.set()
        return False

    proc = OwnedProcess(
        "child",
        [sys.executable, "-c", CHILD, str(tmp_path / "ready"), "never-ready"],
        log_path=tmp_path / "child.log",
        probe=probe,
        ready_timeout=60.0,
    )
    task = asyncio.create_task(proc.__aenter__())
    await probed.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert proc.pid is not None and not procfs.is_alive(proc.pid)
    assert proc.pid not in owned_process_groups()


async def test_stop_is_idempotent(tmp_path: Path) -> None:
    proc = owned(tmp_path)
    assert await proc.stop() is None  # never started
    async with proc:
        pass
    assert await proc.stop() == -signal.SIGTERM


# The safety net: a harness process that dies without stopping its children.
ORPHANING_HARNESS = textwrap.dedent(
    """
    import asyncio, faulthandler, signal, sys, time
    from pathlib import Path
    from harness.clusters.process import OwnedProcess

    faulthandler.register(signal.SIGUSR1)  # the test asks for stacks if this hangs
    # A harness started from a shell turns SIGINT into KeyboardInterrupt; a parent that
    # ignores SIGINT (an xdist worker may) would pass SIG_IGN on and Python keeps it.
    signal.signal(signal.SIGINT, signal.default_int_handler)

    async def start() -> None:
        argv = [sys.executable, "-c", "import time\\nwhile True: time.sleep(0.1)"]
        proc = OwnedProcess("sleeper", argv, log_path=Path(sys.argv[1]))
        await proc.start()
        print(proc.pid, flush=True)

    loop = asyncio.new_event_loop()
    loop.run_until_complete(start())  # never stopped; loop left open on purpose
    if sys.argv[2] == "exit":
        sys.exit(0)
    while True:
        time.sleep(0.1)
    """
)


@pytest.mark.parametrize("ending", ["exit", "SIGINT", "SIGTERM"])
def test_safety_net_kills_owned_groups_when_the_harness_ends(tmp_path: Path, ending: str) -> None:
    err = (tmp_path / "harness.err").open("w")
    harness = subprocess.Popen(
        [sys.executable, "-c", ORPHANING_HARNESS, str(tmp_path / "sleeper.log"), ending],
        stdout=subprocess.PIPE,
        stderr=err,
        text=True,
        cwd=Path(__file__).resolve().parents[3],
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    try:
        assert harness.stdout is not None
        child = int(harness.stdout.readline())
        if ending != "exit":  # with "exit" the harness may already be gone, and the child
            assert procfs.is_alive(child)
            harness.send_signal(getattr(signal, ending))
        try:
            harness.wait(30)  # seconds on a loaded machine; normally well under one
        except subprocess.TimeoutExpired:
            harness.send_signal(signal.SIGUSR1)
            time.sleep(1)
            stacks = (tmp_path / "harness.err").read_text()
            raise AssertionError(f"the harness did not end on {ending}:\n{stacks}") from None
        deadline = time.monotonic() + 5
        while procfs.is_alive(child) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not procfs.is_alive(child), f"the child survived its harness ({ending})"
    finally:
        if harness.poll() is None:
            harness.kill()
            harness.wait()
        if harness.stdout is not None:
            harness.stdout.close()
        err.close()
