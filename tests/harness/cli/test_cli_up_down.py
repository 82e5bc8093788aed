"""``watcher-harness up --detach`` / ``down``: state files, PID checks, a real round trip."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.cli import main
from harness.cli.up_state import state_file


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """State files go to this test's cache; the kube-apiserver binary stays shared."""
    from harness.clusters.go_build import cache_root

    shared = cache_root()
    monkeypatch.setenv("WATCHER_HARNESS_CACHE", str(tmp_path / "cache"))
    (tmp_path / "cache").mkdir()
    if (shared / "bin").is_dir():
        (tmp_path / "cache" / "bin").symlink_to(shared / "bin")


def test_down_without_environment_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["down", "nothing-here"]) == 1
    assert "no environment 'nothing-here' is up" in capsys.readouterr().err


def test_down_never_signals_a_pid_that_is_not_ours(capsys: pytest.CaptureFixture[str]) -> None:
    path = state_file("stale")
    path.parent.mkdir(parents=True, exist_ok=True)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        path.write_text(json.dumps({"name": "stale", "pid": sleeper.pid}))
        assert main(["down", "stale"]) == 0
        assert "not running any more" in capsys.readouterr().out
        assert sleeper.poll() is None, "down signalled a process that is not an `up`"
        assert not path.exists()
    finally:
        sleeper.kill()
        sleeper.wait()


def test_health_without_environment_says_what_to_run(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["health", "nothing-here"]) == 2
    assert "`watcher-harness up --detach` starts one" in capsys.readouterr().err


def test_bad_name_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["up", "--name", "Not_A_Label", "--detach"]) == 2
    assert "DNS label" in capsys.readouterr().err


def running(pid: int) -> bool:
    """Alive and not a zombie waiting for whoever adopted it to reap it."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


@pytest.mark.e2e
@pytest.mark.timeout(300)
def test_detach_then_down_leaves_nothing_running() -> None:
    cli = [sys.executable, "-m", "harness.cli"]
    env = dict(os.environ)
    up = subprocess.run(
        [*cli, "up", "--detach", "--skrs", "1", "--name", "e2e-updown", "--health-interval", "2"],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
        check=False,
    )
    assert up.returncode == 0, up.stderr
    state = json.loads(state_file("e2e-updown").read_text())
    assert set(state["kubeconfigs"]) == {"kcp", "skr-a"}
    assert all(Path(p).is_file() for p in state["kubeconfigs"].values())
    health = [*cli, "health", "e2e-updown", "--json", "--fail-on", "never"]
    deadline = time.monotonic() + 30
    rows: list[dict[str, object]] = []
    while time.monotonic() < deadline:  # the first heartbeat comes at its phase (≤ 2 s)
        answer = subprocess.run(health, capture_output=True, text=True, timeout=60, check=False)
        assert answer.returncode in (0, 2), answer.stderr
        rows = json.loads(answer.stdout) if answer.returncode == 0 else []
        if rows and rows[0]["state"] == "Healthy":
            break
        time.sleep(0.5)
    assert [(r["runtimeId"], r["state"]) for r in rows] == [("runtime-a", "Healthy")]
    down = subprocess.run(
        [*cli, "down", "e2e-updown"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert down.returncode == 0, down.stderr
    assert not state_file("e2e-updown").exists()
    assert not running(int(state["pid"]))
    assert not any(Path(p).exists() for p in state["kubeconfigs"].values())
