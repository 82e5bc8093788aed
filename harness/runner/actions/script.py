"""``script``: run a command with the clusters' kubeconfigs in its environment, bounded by
its timeout (the whole process group is killed then, or when the step is cancelled);
judged by :mod:`harness.expect.script`, its full output kept in the scenario's logs."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shlex
import signal
import time
from collections.abc import Mapping

from harness.expect.observations import ScriptResult
from harness.expect.script import judge
from harness.runner.actions.expect import record
from harness.runner.context import RunContext
from harness.runner.errors import ExpectationFailed
from harness.scenario import KCP, Script


def kubeconfig_variable(cluster: str) -> str:
    """``skr-a`` → ``KUBECONFIG_SKR_A``."""
    return "KUBECONFIG_" + cluster.upper().replace("-", "_")


def script_env(ctx: RunContext, spec: Script) -> dict[str, str]:
    env = dict(os.environ)
    for cluster in (KCP, *(s.name for s in ctx.scenario.clusters.skrs)):
        env[kubeconfig_variable(cluster)] = str(ctx.session.kubeconfig(cluster))
    env.update(spec.env)
    return env


def _kill(process: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)


async def execute(
    command: tuple[str, ...] | str, env: Mapping[str, str], cwd: str, limit: float
) -> ScriptResult:
    """Run ``command`` in its own process group; killed (group) after ``limit`` seconds."""
    argv = ("/bin/sh", "-c", command) if isinstance(command, str) else command
    shown = command if isinstance(command, str) else shlex.join(command)
    started = time.monotonic()
    try:
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=dict(env),
            cwd=cwd,
            start_new_session=True,
        )
    except OSError as exc:
        return ScriptResult(shown, None, error=f"cannot start: {exc}")
    try:
        async with asyncio.timeout(limit):
            out, err = await process.communicate()
    except TimeoutError:
        _kill(process)
        out, err = await process.communicate()
        return ScriptResult(
            shown,
            None,
            out.decode(errors="replace"),
            err.decode(errors="replace"),
            time.monotonic() - started,
            error=f"killed after its timeout of {limit:g} s",
        )
    finally:
        if process.returncode is None:  # cancelled (step timeout): leave nothing running
            _kill(process)
            await process.wait()
    return ScriptResult(
        shown,
        process.returncode,
        out.decode(errors="replace"),
        err.decode(errors="replace"),
        time.monotonic() - started,
    )


async def run(ctx: RunContext, spec: Script) -> None:
    result = await execute(spec.command, script_env(ctx, spec), str(ctx.base_dir), spec.timeout)
    ctx.log_output(f"script {result.command}", f"{result.stdout}\n--- stderr ---\n{result.stderr}")
    failure = record(ctx, judge(spec, result), result.duration)
    if failure is not None:
        raise ExpectationFailed([failure])
