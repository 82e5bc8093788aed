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
from harness.expect.script import captured_output, judge, judged_with_problems
from harness.runner.actions.expect import record
from harness.runner.context import RunContext
from harness.runner.errors import ExpectationFailed
from harness.scenario import KCP, Script
from harness.scenario.names import kubeconfig_variable


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
    error = None
    try:
        async with asyncio.timeout(limit):
            out, err = await process.communicate()
    except TimeoutError:
        _kill(process)
        out, err = await process.communicate()
        error = f"killed after its timeout of {limit:g} s"
    finally:
        if process.returncode is None:  # cancelled (step timeout): leave nothing running
            _kill(process)
            await process.wait()
    return ScriptResult(
        shown,
        None if error else process.returncode,
        out.decode(errors="replace"),
        err.decode(errors="replace"),
        time.monotonic() - started,
        error=error,
    )


async def run(ctx: RunContext, spec: Script) -> None:
    """Run the command once — or, with ``within``, again every ``interval`` until its checks
    hold or ``within`` has passed (each run still bounded by ``timeout``); the last run is
    judged and reported, with how many runs it took."""
    env, cwd = script_env(ctx, spec), str(ctx.base_dir)
    started = time.monotonic()
    deadline = started + (spec.within or 0.0)
    attempts = 0
    while True:
        attempts += 1
        limit = spec.timeout
        if spec.within is not None:
            limit = max(0.1, min(spec.timeout, deadline - time.monotonic()))
        result = await execute(spec.command, env, cwd, limit)
        check = judge(spec, result, attempts=attempts)
        values, problems = captured_output(spec, result) if check.ok else ({}, [])
        if check.ok and problems:
            check = judged_with_problems(check, problems)
        now = time.monotonic()
        if check.ok or spec.within is None or now + spec.interval >= deadline:
            break
        await asyncio.sleep(spec.interval)
    ctx.log_output(f"script {result.command}", f"{result.stdout}\n--- stderr ---\n{result.stderr}")
    failure = record(ctx, check, time.monotonic() - started)
    if failure is not None:
        raise ExpectationFailed([failure])
    if values:
        ctx.capture(values, f"script {result.command}")
