"""The benchmark suite: run the selected benchmarks in order, write docs, print targets.

``python -m harness.bench [--quick] [--only NAME ...] [--out DIR] [--e2e-seconds S]``.
One module per benchmark; each returns a :class:`~harness.bench.model.BenchResult` and is
bounded by its own time budget. A benchmark that fails is reported as failed and the
others still run. Output: ``<out>/benchmarks.md``, ``benchmarks.json`` and the PNG plots.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from importlib import metadata
from pathlib import Path

from harness.bench.common import BenchContext, loadavg
from harness.bench.model import BenchResult, RunMeta
from harness.bench.writer import render_console, render_json, render_markdown, render_plots
from harness.versions import KUBERNETES_VERSION
from watcher import __version__

DOCS = Path(__file__).resolve().parents[2] / "docs"

Runner = Callable[[BenchContext], Awaitable[BenchResult]]


@dataclass(frozen=True)
class Benchmark:
    name: str
    title: str
    budget_s: float  # seconds; the benchmark is cancelled and reported failed beyond it
    entry: str
    """``module:function`` below :mod:`harness.bench`, imported only when the benchmark runs
    (a selection with ``--only`` does not pay for the others' imports)."""

    def run(self, ctx: BenchContext) -> Awaitable[BenchResult]:
        module, _, function = self.entry.partition(":")
        runner: Runner = getattr(importlib.import_module(f"harness.bench.{module}"), function)
        return runner(ctx)


BENCHMARKS: tuple[Benchmark, ...] = (
    Benchmark("admission", "1. Admission latency vs KCP health", 300, "admission:run_admission"),
    Benchmark("e2e", "2. End-to-end latency", 240, "e2e:run_e2e"),
    Benchmark("throughput", "3. Webhook throughput", 120, "throughput:run_throughput"),
    Benchmark("scale", "4. Gateway + listener scale", 300, "scale:run_scale"),
    Benchmark("requeue", "5. Requeue economics (simulated time)", 60, "requeue:run_in_suite"),
    Benchmark("cost", "6. Harness cost", 240, "cost:run_cost"),
    Benchmark("health", "7. Watcher health cost", 180, "health:run_health"),
    Benchmark("fleet", "8. Fleet run", 1200, "fleet:run_fleet"),
    Benchmark(
        "constrained", "9. Webhook at upstream's 100m CPU limit", 240, "constrained:run_constrained"
    ),
    Benchmark("klm-scale", "10. KLM at scale (real SKRs, any KLM)", 900, "klm_scale:run_klm_scale"),
)
NAMES = tuple(b.name for b in BENCHMARKS)


def _version_of(argv: Sequence[str], pattern: str) -> str:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return "unavailable"
    found = re.search(pattern, out.stdout + out.stderr)
    return found.group(1) if found else "unknown"


def versions() -> dict[str, str]:
    from harness.clusters.binaries import ensure_binaries
    from harness.kcp.gateway.envoy_process import default_envoy

    found = {
        "Python": platform.python_version(),
        "watcher": __version__,
        "kube-apiserver": KUBERNETES_VERSION,
    }
    with contextlib.suppress(Exception):
        binaries = ensure_binaries()
        found["etcd"] = _version_of([str(binaries.etcd), "--version"], r"etcd Version: (\S+)")
    with contextlib.suppress(Exception):
        found["Envoy"] = _version_of(
            [str(default_envoy()), "--version"], r"version: [0-9a-f]+/([0-9.]+)"
        )
    for package in ("aiohttp", "cryptography"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            found[package] = metadata.version(package)
    return found


async def run_suite(
    selected: Sequence[Benchmark], *, quick: bool, workdir: Path, e2e_seconds: float | None
) -> list[BenchResult]:
    ctx = BenchContext(quick=quick, workdir=workdir, e2e_seconds=e2e_seconds)
    results: list[BenchResult] = []
    for bench in selected:
        print(f"== {bench.title} ...", flush=True)
        started = time.monotonic()
        try:
            async with asyncio.timeout(bench.budget_s):
                result = replace(await bench.run(ctx), seconds=time.monotonic() - started)
        except Exception as exc:  # reported as a failed benchmark; the others still run
            detail = "".join(traceback.format_exception_only(exc)).strip()
            if isinstance(exc, TimeoutError):
                detail = f"over its time budget of {bench.budget_s:.0f} s ({detail})"
            print(traceback.format_exc(), file=sys.stderr)
            result = BenchResult(
                name=bench.name,
                title=bench.title,
                seconds=time.monotonic() - started,
                error=detail,
            )
        print(f"   {bench.name}: {result.seconds:.0f} s{' FAILED' if result.error else ''}")
        results.append(result)
    return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m harness.bench", description="Run the benchmark suite; write docs."
    )
    parser.add_argument("--quick", action="store_true", help="fewer samples, shorter loads")
    parser.add_argument("--only", nargs="+", choices=NAMES, metavar="NAME", help=f"{NAMES}")
    parser.add_argument("--out", type=Path, default=DOCS, help="where to write (default docs/)")
    parser.add_argument(
        "--e2e-seconds",
        type=float,
        help="wall time of the last `make e2e` run, for the harness-cost table",
    )
    args = parser.parse_args(argv)
    selected = [b for b in BENCHMARKS if not args.only or b.name in args.only]
    command = "python -m harness.bench" + (" --quick" if args.quick else "")
    if args.only:
        command += " --only " + " ".join(args.only)
    load_before = loadavg()
    started = time.monotonic()
    found_versions = versions()
    with tempfile.TemporaryDirectory(prefix="watcher-bench-") as tmp:
        results = asyncio.run(
            run_suite(selected, quick=args.quick, workdir=Path(tmp), e2e_seconds=args.e2e_seconds)
        )
    meta = RunMeta(
        command=command,
        date=time.strftime("%Y-%m-%d %H:%M %Z"),
        cores=os.cpu_count() or 1,
        load_before=load_before,
        load_after=loadavg(),
        seconds=time.monotonic() - started,
        versions=found_versions,
        quick=args.quick,
    )
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    plots = render_plots(results)
    for name, png in plots.items():
        (out / name).write_bytes(png)
    (out / "benchmarks.md").write_text(render_markdown(results, meta, plots=sorted(plots)))
    (out / "benchmarks.json").write_text(render_json(results, meta))
    print()
    print(render_console(results))
    print(f"\nwritten {out / 'benchmarks.md'}, benchmarks.json, {len(plots)} plot(s) "
          f"in {meta.seconds:.0f} s")  # fmt: skip
    return 1 if any(r.error for r in results) else 0
