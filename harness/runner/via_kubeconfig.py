"""The scenario library on the ``kubeconfig`` backend, against clusters it only knows by file.

``python -m harness.runner.via_kubeconfig [PATHS...] [-- PYTEST ARGS]`` (``make
e2e-kubeconfig``): starts one ``local`` cluster per name the scenarios use, writes ONE
kubeconfig file with a context per cluster (certificates embedded), and runs ``pytest -m
e2e PATHS --cluster-backend kubeconfig --cluster-kubeconfig FILE`` in a separate process,
which gets nothing but the file's path — what the backend would get from a real landscape.
Scenarios run one after another on shared clusters, each cleaning up after itself
(``--shards N``: N groups at once, each on its own clusters). Afterwards every cluster must
hold exactly what it held before (:mod:`harness.clusters.ownership`'s inventory);
leftovers fail the run. Exit status: pytest's, or 1 for leftovers.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.clusters.binaries import ensure_binaries
from harness.clusters.contexts import merged_kubeconfig, select_context
from harness.clusters.ownership import ALL_KINDS, Inventory, inventory
from harness.clusters.plane import Environment, LocalBackend
from harness.scenario import KCP
from harness.scenario.collection import collect_scenarios
from harness.scenario.loader import scenario_files

ROOT = Path(__file__).resolve().parents[2]


def cluster_names(paths: Sequence[str]) -> list[str]:
    """The KCP and every SKR name used by the valid scenarios under ``paths``, sorted."""
    skrs = {skr.name for _, s in collect_scenarios(paths).scenarios for skr in s.clusters.skrs}
    return [KCP, *sorted(skrs)]


def write_kubeconfig(env: Environment, directory: Path) -> Path:
    """One self-contained kubeconfig, a context per cluster named like the cluster."""
    accesses = {
        name: select_context(cluster.kubeconfig_embedded, path=f"{name} (embedded)")
        for name, cluster in env.clusters.items()
    }
    path = directory / "kubeconfig"
    path.write_text(merged_kubeconfig(accesses), encoding="utf-8")
    path.chmod(0o600)
    return path


async def _inventories(env: Environment) -> dict[str, Inventory]:
    out = {}
    for name, cluster in env.clusters.items():
        async with cluster.api_client() as api:
            out[name] = await inventory(api, ALL_KINDS)
    return out


def leftovers(
    before: dict[str, Inventory], after: dict[str, Inventory], *, ours: bool = True
) -> list[str]:
    """``cluster: Kind namespace/name`` for every object (``ours``: the harness wrote it)
    that was not there before."""
    lines = []
    for name, inv in after.items():
        for resource, objects in inv.new_since(before[name], ours=ours).items():
            for e in sorted(objects.values(), key=lambda e: (e.namespace, e.name)):
                where = f"{e.namespace}/{e.name}" if e.namespace else e.name
                lines.append(f"{name}: {resource.kind} {where}")
    return lines


async def _pytest(argv: Sequence[str]) -> int:
    """pytest in its own process; killed (process group) if we are interrupted."""
    process = await asyncio.create_subprocess_exec(*argv, cwd=ROOT, start_new_session=True)
    try:
        return await process.wait()
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, 9)
        await process.wait()
        raise


def split(files: Sequence[Path], shards: int) -> list[list[Path]]:
    """``files`` dealt round-robin into at most ``shards`` non-empty groups."""
    groups: list[list[Path]] = [[] for _ in range(max(1, min(shards, len(files))))]
    for index, file in enumerate(files):
        groups[index % len(groups)].append(file)
    return groups


@dataclass(frozen=True)
class ShardResult:
    status: int
    seconds: float
    left: list[str]
    others: list[str]


async def run_shard(
    label: str,
    files: Sequence[Path],
    pytest_args: Sequence[str],
    report_dir: Path | None,
    log_dir: Path | None,
) -> ShardResult:
    """One set of local clusters, one kubeconfig file, one pytest process for ``files``."""
    paths = [str(f) for f in files]
    names = cluster_names(paths)
    binaries = await asyncio.to_thread(ensure_binaries)
    reports: list[str] = []
    if report_dir is not None:
        reports = [f"--scenario-report-dir={report_dir}", f"--junitxml={report_dir}/junit.xml"]
    with tempfile.TemporaryDirectory(prefix="watcher-kubeconfig-e2e-") as tmp:
        async with LocalBackend(binaries, log_dir=log_dir).start(names) as env:
            kubeconfig = write_kubeconfig(env, Path(tmp))
            print(f"{label}: {len(paths)} scenarios on {len(names)} local clusters "
                  f"({', '.join(names)}) known by {kubeconfig}", flush=True)  # fmt: skip
            before = await _inventories(env)
            argv = [
                sys.executable, "-m", "pytest", "-p", "no:xdist", "-m", "e2e", *paths,
                "--cluster-backend", "kubeconfig", "--cluster-kubeconfig", str(kubeconfig),
                *reports, *pytest_args,
            ]  # fmt: skip
            started = time.monotonic()
            status = await _pytest(argv)
            seconds = time.monotonic() - started
            after = await _inventories(env)
    left = leftovers(before, after)
    others = sorted(set(leftovers(before, after, ours=False)) - set(left))
    return ShardResult(status, seconds, left, others)


async def run(
    paths: Sequence[str],
    pytest_args: Sequence[str],
    *,
    shards: int = 1,
    report_dir: Path | None = None,
    log_dir: Path | None = None,
) -> int:
    """The library in ``shards`` concurrent groups, each on its own clusters."""
    groups = split(scenario_files(paths), shards)
    started = time.monotonic()
    results = await asyncio.gather(
        *(
            run_shard(
                f"shard {i + 1}/{len(groups)}",
                files,
                pytest_args,
                report_dir / f"shard-{i + 1}" if report_dir and len(groups) > 1 else report_dir,
                log_dir / f"shard-{i + 1}" if log_dir else None,
            )
            for i, files in enumerate(groups)
        )
    )
    print(f"scenario library on the kubeconfig backend: {time.monotonic() - started:.0f} s "
          f"({', '.join(f'{r.seconds:.0f} s' for r in results)} per shard)")  # fmt: skip
    others = [line for r in results for line in r.others]
    left = [line for r in results for line in r.left]
    if others:
        print("new objects the harness did not write (left alone):", *others, sep="\n  ")
    status = next((r.status for r in results if r.status), 0)
    if left:
        print(f"{len(left)} objects left behind in the clusters:", *left, sep="\n  ")
        return status or 1
    print("every cluster holds exactly what it held before the library ran")
    return status


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m harness.runner.via_kubeconfig", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("paths", nargs="*", default=["scenarios/"], metavar="FILE|DIR")
    parser.add_argument("--log-dir", type=Path, help="keep the local API servers' logs here")
    parser.add_argument(
        "--shards", type=int, default=1, help="groups run at once, each on its own clusters"
    )
    parser.add_argument(
        "--report-dir", type=Path, help="scenario report and JUnit (per shard: DIR/shard-N)"
    )
    argv = list(sys.argv[1:] if argv is None else argv)
    split = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_args(argv[:split])
    pytest_args = argv[split + 1 :]
    try:
        return asyncio.run(
            run(
                args.paths,
                pytest_args,
                shards=args.shards,
                report_dir=args.report_dir,
                log_dir=args.log_dir,
            )
        )
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
