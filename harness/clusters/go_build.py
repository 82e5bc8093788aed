"""Building a Go program into the harness's cache: once, complete, with its log kept.

Parallel xdist workers and concurrent make targets may all find a program missing;
:func:`build_once` lets one of them build under an exclusive ``flock`` while the others
wait and reuse the result. :func:`compile_go` writes to a temporary file and renames it
into place only after a check of the program passed, so a cached binary is always
complete; on a terminal it shows a live status line, and the build log stays in
``<cache>/logs``. The cache is ``$WATCHER_HARNESS_CACHE``, else
``$XDG_CACHE_HOME/watcher-harness`` (``~/.cache``).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import shlex
import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from harness.clusters.process import log_tail, with_log_tail
from harness.clusters.progress import interactive, make_console
from harness.errors import BuildError, VersionMismatch

CACHE_ENV = "WATCHER_HARNESS_CACHE"
TOOLS_DIR = Path(__file__).resolve().parents[2] / "tools"
"""The repository's Go modules, one directory each."""


def cache_root(env: Mapping[str, str] = os.environ) -> Path:
    """``$WATCHER_HARNESS_CACHE``, else ``$XDG_CACHE_HOME/watcher-harness`` (``~/.cache``)."""
    if env.get(CACHE_ENV):
        return Path(env[CACHE_ENV]).expanduser()
    xdg = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "watcher-harness"


def build_log(target: Path, name: str) -> Path:
    """Where the log of building ``target`` (in ``<cache>/bin``) goes."""
    return target.parent.parent / "logs" / f"{name}.build.log"


def sources_digest(module_dir: Path, sources: Sequence[str]) -> str:
    """The first 12 hex digits of the SHA-256 over ``sources`` (names and contents)."""
    digest = hashlib.sha256()
    for name in sources:
        digest.update(name.encode() + b"\0" + (module_dir / name).read_bytes())
    return digest.hexdigest()[:12]


def required_version(go_mod: Path, module: str) -> str:
    """The version of ``module`` that ``go_mod`` requires; :class:`VersionMismatch` if none."""
    pattern = rf"^\s*(?:require\s+)?{re.escape(module)}\s+(v\S+)"
    required = re.search(pattern, go_mod.read_text(), re.M)
    if required is None:
        raise VersionMismatch(f"{go_mod} does not require {module}")
    return required.group(1)


@contextlib.contextmanager
def _exclusive_lock(path: Path, console: Console, what: str) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (released when the file closes); say so when
    we have to wait for it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            console.print(escape(f"waiting for another process building {what} (lock {path})"))
            fcntl.flock(f, fcntl.LOCK_EX)
        yield


def build_once(target: Path, build: Callable[[Console], object], console: Console | None) -> Path:
    """``target``, built first by ``build`` if it is missing: under an exclusive lock next to
    it, so concurrent callers wait for one build instead of each starting their own."""
    if target.is_file():
        return target
    console = console or make_console()
    with _exclusive_lock(target.with_name(target.name + ".lock"), console, target.name):
        if not target.is_file():  # else built by whoever held the lock before us
            build(console)
    return target


def _stop_group(proc: subprocess.Popen[bytes]) -> None:
    """Stop a build we started (its own process group): SIGTERM, wait, SIGKILL."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _run_go_build(
    argv: Sequence[str], *, cwd: Path, log_path: Path, console: Console, what: str
) -> float:
    """Run the build of ``what`` with output to ``log_path`` and a live status line; return
    seconds."""
    started = time.monotonic()
    with log_path.open("wb") as log:
        log.write(f"### {shlex.join(argv)}\n".encode())
        log.flush()
        proc = subprocess.Popen(
            argv, cwd=cwd, env=dict(os.environ, CGO_ENABLED="0"), stdout=log,
            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
    try:
        if interactive(console):
            with console.status(f"building {escape(what)}") as status:
                while proc.poll() is None:
                    last = escape(log_tail(log_path, 1)[-70:])
                    status.update(
                        f"building {escape(what)} "
                        f"({time.monotonic() - started:.0f} s) [dim]{last}[/dim]"
                    )
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        proc.wait(timeout=0.5)
        else:
            proc.wait()
    finally:
        _stop_group(proc)  # no-op unless we are leaving early (Ctrl-C, error)
    elapsed = time.monotonic() - started
    if proc.returncode != 0:
        raise BuildError(
            with_log_tail(
                f"building {what} failed (go exited with code {proc.returncode} after "
                f"{elapsed:.0f} s)",
                log_path,
            )
        )
    return elapsed


def compile_go(
    go: Path,
    flags: Sequence[str],
    package: str,
    *,
    target: Path,
    module_dir: Path,
    log_path: Path,
    what: str,
    check: Callable[[Path], None],
    console: Console,
) -> float:
    """``go build <flags> -o <target> <package>`` in ``module_dir`` with cgo off, through a
    temporary file renamed to ``target`` once ``check`` accepted it; return the seconds."""
    target.parent.mkdir(parents=True, exist_ok=True)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    argv = [str(go), "build", *flags, "-o", str(tmp), package]
    try:
        elapsed = _run_go_build(argv, cwd=module_dir, log_path=log_path, console=console, what=what)
        check(tmp)
        tmp.chmod(0o755)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    console.print(escape(f"built {target} in {elapsed:.0f} s"))
    return elapsed
