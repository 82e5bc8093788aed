"""The Go programs of ``tools/`` the harness runs besides kube-apiserver, built on demand.

Upstream's listener (``github.com/kyma-project/runtime-watcher/listener``, pinned in
``tools/upstream-listener/go.mod`` and ``harness/versions.py``) is built from the small
program in ``tools/upstream-listener``, so scenarios can put upstream's implementation
behind the gateway in place of ours. The scale benchmark's load generator
(``tools/event-load``, the Go standard library only) is built the same way. Each is cached
under a name carrying a hash of its sources (and the listener's version), so an edit
rebuilds it.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from rich.console import Console

from harness import versions
from harness.clusters import go_build
from harness.clusters.installed_programs import find_go
from harness.errors import BinaryUnavailable, BuildError, VersionMismatch

UPSTREAM_LISTENER_DIR = go_build.TOOLS_DIR / "upstream-listener"
UPSTREAM_LISTENER_SOURCES = ("go.mod", "go.sum", "main.go")
EVENT_LOAD_DIR = go_build.TOOLS_DIR / "event-load"
EVENT_LOAD_SOURCES = ("go.mod", "main.go")


def check_upstream_listener_go_mod(
    go_mod: Path, version: str = versions.UPSTREAM_LISTENER_VERSION
) -> None:
    """Raise :class:`VersionMismatch` unless ``go_mod`` requires upstream's listener at
    ``version``."""
    required = go_build.required_version(go_mod, versions.UPSTREAM_LISTENER_MODULE)
    if required != version:
        raise VersionMismatch(
            f"harness/versions.py pins UPSTREAM_LISTENER_VERSION={version} but {go_mod} "
            f"requires {versions.UPSTREAM_LISTENER_MODULE} {required}: update one of "
            "them (then `go mod tidy` in tools/upstream-listener)"
        )


def upstream_listener_path(
    cache: Path,
    module_dir: Path = UPSTREAM_LISTENER_DIR,
    version: str = versions.UPSTREAM_LISTENER_VERSION,
) -> Path:
    """Where the program built from ``module_dir``'s current sources is cached."""
    digest = go_build.sources_digest(module_dir, UPSTREAM_LISTENER_SOURCES)
    return cache / "bin" / f"upstream-listener-{version}-{digest}"


def event_load_path(cache: Path, module_dir: Path = EVENT_LOAD_DIR) -> Path:
    """Where the load generator built from ``module_dir``'s current sources is cached."""
    return cache / "bin" / f"event-load-{go_build.sources_digest(module_dir, EVENT_LOAD_SOURCES)}"


def _verify_runs(binary: Path, flag: str) -> None:
    """``-h`` prints the flags (``flag`` among them) and exits 0 (Go's flag package) when
    the binary runs here."""
    out = subprocess.run(
        [str(binary), "-h"], capture_output=True, text=True, timeout=60, check=False
    )
    if out.returncode != 0 or flag not in out.stderr:
        raise BuildError(
            f"{binary} -h exited {out.returncode} without its usage: {out.stderr.strip()[-500:]}"
        )


def _ensure_go_tool(
    target: Callable[[], Path],
    *,
    module_dir: Path,
    what: str,
    needed_for: str,
    usage_flag: str,
    console: Console | None,
    go_hint: str = "",
) -> Path:
    """Build the ``main`` package of ``module_dir`` into ``target()`` unless it is there,
    cached once ``-h`` shows ``usage_flag``; the log is ``logs/<module dir name>.build.log``
    of the cache. ``go_hint`` ends the message when there is no Go toolchain."""
    if not (module_dir / "go.mod").is_file():
        raise BinaryUnavailable(
            f"{needed_for}, which is missing; run from a checkout of this repository"
        )
    path = target()

    def build(console: Console) -> None:
        try:
            go = find_go(needed_for=needed_for)
        except BinaryUnavailable as e:
            raise BinaryUnavailable(f"{e}{go_hint}") from e
        go_build.compile_go(
            go,
            ["-trimpath", "-ldflags", "-s -w"],
            ".",
            target=path,
            module_dir=module_dir,
            log_path=go_build.build_log(path, module_dir.name),
            what=what,
            check=lambda binary: _verify_runs(binary, usage_flag),
            console=console,
        )

    return go_build.build_once(path, build, console)


def ensure_upstream_listener(
    *,
    cache: Path | None = None,
    module_dir: Path = UPSTREAM_LISTENER_DIR,
    console: Console | None = None,
) -> Path:
    """Upstream's Go listener program, building it first if its sources changed (~1 min
    the first time, module download included)."""
    version = versions.UPSTREAM_LISTENER_VERSION

    def target() -> Path:
        check_upstream_listener_go_mod(module_dir / "go.mod", version)
        return upstream_listener_path(cache or go_build.cache_root(), module_dir, version)

    return _ensure_go_tool(
        target,
        module_dir=module_dir,
        what=f"upstream listener {version}",
        needed_for=f"upstream's listener is built from {module_dir}",
        usage_flag="-component",
        console=console,
    )


def ensure_event_load(
    *,
    cache: Path | None = None,
    module_dir: Path = EVENT_LOAD_DIR,
    console: Console | None = None,
) -> Path:
    """The scale benchmark's Go load generator (``tools/event-load``), building it first if
    its sources changed (seconds: the standard library only, nothing to download)."""
    return _ensure_go_tool(
        lambda: event_load_path(cache or go_build.cache_root(), module_dir),
        module_dir=module_dir,
        what="load generator event-load",
        needed_for=f"the scale benchmark's load generator is built from {module_dir}",
        usage_flag="-identities",
        console=console,
        go_hint=f" Then `make binaries` (or `{sys.executable} -m harness.clusters.binaries "
        "ensure --event-load`) builds it.",
    )
