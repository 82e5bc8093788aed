"""The state file of an environment ``up`` keeps running, and the processes it names.

A running environment is described by a state file (``<cache>/envs/<name>.json``: owner
PID, kubeconfigs, ports) that the owning process writes when ready and removes when it has
stopped everything. ``down`` signals that PID — never a process found by name — after
checking it still is our ``up`` process. Apart from :mod:`harness.cli.up` because
``get``, ``down`` and ``health`` need only this, not the environment.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from harness.errors import HarnessError

DETACH_READY_TIMEOUT = 180.0
DOWN_TIMEOUT = 60.0


def state_dir() -> Path:
    from harness.clusters.go_build import cache_root

    return cache_root() / "envs"


def state_file(name: str) -> Path:
    return state_dir() / f"{name}.json"


def print_state(state: dict[str, Any]) -> None:
    print(
        f"environment {state['name']} (pid {state['pid']}), clusters ready in "
        f"{state['startup_seconds']:.1f} s; kubeconfigs:"
    )
    for cluster, path in state["kubeconfigs"].items():
        print(f"  {cluster:8} {path}")
    print(f"gateway   {state['gateway']} (admin {state['gateway_admin']})")
    if state["klm_listener"]:
        print(f"KLM listener {state['klm_listener']}")
    if state.get("klm_metrics"):
        print(f"KLM metrics  {state['klm_metrics']}")
    if state.get("watcher_health"):
        print(f"watcher health: `watcher-harness health {state['name']}` prints the table")
    for skr, hook in state["webhooks"].items():
        print(f"webhook {skr}: {hook['url']} metrics {hook['metrics']}")
    if state.get("scenario"):
        scenario = state["scenario"]
        print(f"scenario {scenario['name']} ({scenario['file']}): set up; no steps run")
    if state.get("modules"):
        print(state["modules"])


def claim(name: str) -> asyncio.Event:
    """The event SIGINT/SIGTERM set; an error if another ``up`` holds environment
    ``name``'s state file."""
    if running(name) is not None:
        raise HarnessError(
            f"environment {name!r} is already up (see {state_file(name)}); "
            f"`watcher-harness down {name}` stops it"
        )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    return stop


def running(name: str) -> dict[str, Any] | None:
    """The state of environment ``name`` while its ``up`` process runs, else None."""
    try:
        state = json.loads(state_file(name).read_text())
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) and owner_alive(state) else None


def owner_alive(state: dict[str, Any]) -> bool:
    """Is the state's PID still our ``up`` process (not a reused PID)?"""
    try:
        cmdline = Path(f"/proc/{int(state['pid'])}/cmdline").read_bytes().split(b"\0")
    except (OSError, KeyError, ValueError):
        return False
    launched = any(part.endswith((b"harness.cli", b"watcher-harness")) for part in cmdline)
    return launched and b"up" in cmdline


def detach(name: str, up_args: list[str]) -> int:
    """Start ``up --name NAME UP_ARGS`` in its own session; return once it is ready (or
    say why not)."""
    path = state_file(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    log = path.with_suffix(".log")
    argv = [sys.executable, "-m", "harness.cli", "up", "--name", name, *up_args]
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            argv,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    deadline = time.monotonic() + DETACH_READY_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
            print(
                f"watcher-harness: up exited with {proc.returncode}; last lines of {log}:\n{tail}",
                file=sys.stderr,
            )
            return 1
        if path.exists():
            state = json.loads(path.read_text())
            if state.get("pid") == proc.pid:
                print_state(state)
                print(
                    f"running in the background (log {log}); "
                    f"`watcher-harness down {name}` stops it."
                )
                return 0
        time.sleep(0.2)
    print(
        f"watcher-harness: not ready after {DETACH_READY_TIMEOUT:.0f} s; stopping it (log {log})",
        file=sys.stderr,
    )
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(DOWN_TIMEOUT)
    return 1


def down(name: str) -> int:
    path = state_file(name)
    if not path.exists():
        print(f"watcher-harness: no environment {name!r} is up (no {path})", file=sys.stderr)
        return 1
    state = json.loads(path.read_text())
    if not owner_alive(state):
        path.unlink(missing_ok=True)
        print(f"environment {name!r} was not running any more; removed its state file")
        return 0
    pid = int(state["pid"])
    os.kill(pid, signal.SIGTERM)  # its handler stops every process it owns, in order
    deadline = time.monotonic() + DOWN_TIMEOUT
    while time.monotonic() < deadline:
        if not owner_alive(state):
            print(f"environment {name!r} stopped; nothing left running.")
            return 0
        time.sleep(0.2)
    print(
        f"watcher-harness: environment {name!r} (pid {pid}) did not stop within "
        f"{DOWN_TIMEOUT:.0f} s; see {path.with_suffix('.log')}",
        file=sys.stderr,
    )
    return 1
