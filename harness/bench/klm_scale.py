"""Benchmark 10: a Lifecycle Manager at scale — N real SKRs, any KLM build.

KLM's maintainers ask how KLM behaves with many SKRs before they have a landscape to
try it on. This run answers it on one machine for any KLM the harness can start
(:mod:`harness.environment.any_klm`): ours as the ``watcher-klm`` process, upstream's Go
KLM (or any build) with ``--klm-command``; several in one invocation, one after the
other on fresh environments, side by side in one table. The success requeue interval is
scaled down (KLM: 5 min) to put real load on the queue. Measured: the way to Ready
(sampled once a second) and a churn window of SKR Kyma spec changes (write → event →
reconcile, queue depth, KCP requests/s, CPU and RSS per component).

``python -m harness.bench.klm_scale [--quick] [--skrs N] [--klm-command CMD
--klm-crds DIR --klm-label NAME] [--without-ours] [--logs DIR]`` writes ``docs/klm-scale.md``,
``.json`` and ``.png``; ``make bench`` runs it for ours.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shlex
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from harness.aio import spawn, stop_tasks
from harness.bench.common import BenchContext, cpu_seconds, delta, loadavg, times_by_key
from harness.bench.fleet import kcp_requests
from harness.bench.fleet_plan import requests_per_second
from harness.bench.klm_scale_report import (
    FULL,
    PLOT,
    QUICK,
    KlmRun,
    Sample,
    ScaleConfig,
    Seen,
    Write,
    klm_scale_result,
    run_figures,
    timeline_png,
)
from harness.bench.model import BenchResult, RunMeta
from harness.bench.writer import render_json, table_markdown
from harness.clusters import procfs
from harness.clusters.selection import choose_backend
from harness.environment.any_klm import KlmEnvironment, klm_environment
from harness.environment.spec import EnvironmentSpec, SkrSpec
from harness.kcp.lifecycle_manager.queue.reconciler import RequeueIntervals
from harness.kube import KYMAS, list_objects, merge_patch
from watcher.domain import KCP_NAMESPACE, SKR_KYMA_NAME, SKR_NAMESPACE

DOCS = Path(__file__).resolve().parents[2] / "docs"
OURS = "ours (watcher-klm)"


@dataclass(frozen=True)
class KlmUnderTest:
    label: str
    command: tuple[str, ...]
    crds: Path | None = None


def ours() -> KlmUnderTest:
    found = shutil.which("watcher-klm") or str(Path(sys.executable).parent / "watcher-klm")
    return KlmUnderTest(OURS, (found,))


def scale_spec(klm: KlmUnderTest, config: ScaleConfig, log_dir: Path) -> EnvironmentSpec:
    skrs = tuple(
        SkrSpec(f"skr-{i:02d}", f"runtime-{i:02d}", f"skr-{i:02d}.kyma.example.com")
        for i in range(1, config.skrs + 1)
    )
    backend = replace(choose_backend("local"), klm_command=klm.command, klm_crds=klm.crds)
    return EnvironmentSpec(
        skrs=skrs,
        intervals=RequeueIntervals(success=config.success_interval_s),
        backend=backend,
        log_dir=log_dir,
    )


def component_pids(env: KlmEnvironment) -> dict[str, list[int]]:
    """Component → the process groups it runs as (each owned process leads its group)."""
    clusters = env.clusters

    def apiserver(name: str) -> list[int]:
        record = clusters[name].process
        return [record.pid] if record is not None and record.pid else []

    return {
        "KLM": [env.klm.pid] if env.klm.pid else [],
        "KCP kube-apiserver": apiserver("kcp"),
        "etcd (all clusters)": [r.pid for r in clusters.processes if r.name == "etcd" and r.pid],
        "SKR kube-apiservers (all)": [p for s in env.spec.skrs for p in apiserver(s.name)],
        "SKR webhooks (all)": [
            pod.pid for k in env.kubelets.values() for pod in k.all_pods() if pod.pid
        ],
        "Envoy gateway": [env.gateway.pid] if env.gateway.pid else [],
        "harness (cert-manager, kubelets, sidecar, sampling)": [os.getpid()],
    }


def _members(groups: Sequence[int]) -> list[int]:
    own = os.getpid()
    return [p for g in groups for p in ([g] if g == own else procfs.group_members(g) or [g])]


def _total(
    pids: Mapping[str, Sequence[int]], read: Callable[[int], float | None]
) -> dict[str, float | None]:
    """Per component: ``read`` summed over its processes (None when none could be read)."""
    out: dict[str, float | None] = {}
    for name, groups in pids.items():
        present = [v for p in _members(groups) if (v := read(p)) is not None]
        out[name] = sum(present) if present else None
    return out


def cpu_now(pids: Mapping[str, Sequence[int]]) -> dict[str, float | None]:
    return _total(pids, cpu_seconds)


def rss_now(pids: Mapping[str, Sequence[int]]) -> dict[str, float | None]:
    found = _total(pids, procfs.rss_bytes)
    return {name: None if v is None else round(v / 2**20, 1) for name, v in found.items()}


@dataclass
class Observer:
    """Samples the KCP and the KLM once a second from provisioning on."""

    every: float
    t0: float = 0.0
    samples: list[Sample] = field(default_factory=list)
    ready_at: dict[str, float] = field(default_factory=dict)
    requests0: dict[str, float] | None = None
    task: asyncio.Task[None] | None = None

    def start(self, env: KlmEnvironment) -> None:
        self.t0 = time.time()
        self.task = spawn(self._run(env), "klm-scale-sampler")

    async def _run(self, env: KlmEnvironment) -> None:
        self.requests0 = await kcp_requests(env.kcp_api)
        while True:
            kymas, _ = await list_objects(env.kcp_api, KYMAS, KCP_NAMESPACE)
            now = time.time()
            ready = [
                k["metadata"]["name"]
                for k in kymas
                if (k.get("status") or {}).get("state") == "Ready"
            ]
            for name in ready:
                self.ready_at.setdefault(name, round(now - self.t0, 2))
            depth = await env.klm.read_metric("workqueue_depth", {"name": "kyma"})
            total = await env.klm.read_metric(
                "controller_runtime_reconcile_total", {"controller": "kyma"}
            )
            self.samples.append(Sample(round(now - self.t0, 2), len(ready), depth, total))
            if len(self.samples) % 15 == 0:
                print(f"   {len(ready)}/{len(kymas)} Kymas Ready at {now - self.t0:.0f} s, "
                      f"queue depth {depth:g}", flush=True)  # fmt: skip
            await asyncio.sleep(self.every)

    async def stop(self) -> None:
        if self.task is not None:
            await stop_tasks([self.task])


async def churn(env: KlmEnvironment, config: ScaleConfig) -> list[Write]:
    """``config.writes`` SKR Kyma spec changes at ``config.writes_per_s``, round robin
    (channel fast ↔ regular), each PATCH awaited; bounded in count and time."""
    loop = asyncio.get_running_loop()
    skrs = list(env.spec.skrs)
    writes: list[Write] = []
    start = loop.time()
    async with asyncio.timeout(config.window_s * 2 + 30):
        for i in range(config.writes):
            await asyncio.sleep(max(0.0, start + i / config.writes_per_s - loop.time()))
            skr = skrs[i % len(skrs)]
            channel = "fast" if (i // len(skrs)) % 2 == 0 else "regular"
            at = time.time()
            await merge_patch(
                env.skr_apis[skr.name], KYMAS, SKR_KYMA_NAME, SKR_NAMESPACE,
                {"spec": {"channel": channel}},
            )  # fmt: skip
            writes.append(Write(at, skr.runtime_id))
    return writes


async def drain(
    env: KlmEnvironment, writes: Sequence[Write], kyma_of: Mapping[str, str], within: float
) -> None:
    """Until every write's event arrived and every event's Kyma had a reconcile start after
    it (or ``within`` seconds: what is missing then is reported as such)."""
    last_write: dict[str, float] = {}
    for write in writes:
        last_write[write.runtime_id] = max(last_write.get(write.runtime_id, 0.0), write.at)
    since = min(last_write.values(), default=time.time())
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while loop.time() < deadline:
        arrived: dict[str, float] = {}
        for event in env.events:
            if event.received_at >= since:
                arrived[event.runtime_id] = max(
                    arrived.get(event.runtime_id, 0.0), event.received_at
                )
        delivered = all(arrived.get(rid, 0.0) >= at for rid, at in last_write.items())
        reconciled = all(
            env.klm.reconciles(kyma_of.get(rid, ""), since=at) for rid, at in arrived.items()
        )
        if delivered and reconciled:
            return
        await asyncio.sleep(0.2)


async def measure(klm: KlmUnderTest, config: ScaleConfig, workdir: Path) -> KlmRun:
    """One KLM: its environment up, every Kyma Ready, the churn window, all down again."""
    spec = scale_spec(klm, config, workdir / "logs")
    observer = Observer(config.sample_every_s)
    kyma_of = {s.runtime_id: f"{KCP_NAMESPACE}/{s.kyma_name}" for s in spec.skrs}
    try:
        async with klm_environment(
            spec, ready_within=config.ready_within_s, on_running=observer.start
        ) as env:
            ready_s = time.time() - observer.t0
            requests_ready = await kcp_requests(env.kcp_api)
            pids = component_pids(env)
            cpu0, start = cpu_now(pids), time.time()
            writes = await churn(env, config)
            await drain(env, writes, kyma_of, config.drain_s)
            end = time.time()
            cpu1, rss = cpu_now(pids), rss_now(pids)
            requests_end = await kcp_requests(env.kcp_api)
            await observer.stop()
            observed = env.klm.reconciles()
            events = [Seen(e.received_at, e.runtime_id) for e in env.events]
            startup = dict(env.timings)
    finally:
        await observer.stop()

    def rate(
        before: dict[str, float] | None, after: dict[str, float] | None, s: float
    ) -> float | None:
        found = requests_per_second(before, after, s)
        return None if found is None else found["total"]

    return KlmRun(
        label=klm.label,
        command=shlex.join(klm.command),
        config=config,
        t0=observer.t0,
        startup=startup,
        ready_after=observer.ready_at,
        samples=observer.samples,
        window=(start, end),
        writes=writes,
        events=events,
        reconcile_starts=times_by_key((r.kyma, r.at) for r in observed),
        kyma_of=kyma_of,
        requests_per_s={
            "startup": rate(observer.requests0, requests_ready, ready_s),
            "window": rate(requests_ready, requests_end, end - start),
        },
        cpu_s={n: delta(cpu0[n], cpu1[n]) for n in pids},
        rss_mib=rss,
        failed_reconciles=sum(r.failed and start <= r.at <= end for r in observed),
    )


async def measure_all(
    klms: Sequence[KlmUnderTest], config: ScaleConfig, workdir: Path
) -> list[dict[str, object]]:
    figures = []
    for n, klm in enumerate(klms):
        print(f"   klm-scale: {klm.label} with {config.skrs} SKRs ...", flush=True)
        run = await measure(klm, config, workdir / f"klm-{n}")
        figures.append(run_figures(run))
    return figures


async def run_klm_scale(ctx: BenchContext) -> BenchResult:
    """The suite's entry: ours only (a foreign KLM is for the module's own command)."""
    started = time.monotonic()
    config = QUICK if ctx.quick else FULL
    figures = await measure_all([ours()], config, ctx.logs("klm-scale"))
    return klm_scale_result(figures, time.monotonic() - started)


def render_document(result: BenchResult, command: str, seconds: float) -> str:
    lines = [
        "# KLM at scale",
        "",
        f"Produced by `{command}` on {time.strftime('%Y-%m-%d %H:%M %Z')} in "
        f"{seconds / 60:.1f} min on a {os.cpu_count()}-core machine (load average "
        f"{' / '.join(f'{x:.2f}' for x in loadavg())} after). Every figure is also in "
        "[klm-scale.json](klm-scale.json).",
        "",
        result.description,
        "",
        f"![{PLOT}]({PLOT})",
        "",
    ]
    for table in result.tables:
        lines += table_markdown(table)
    lines += [f"- {note}" for note in result.notes]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m harness.bench.klm_scale",
        description="KLM at scale: N real SKRs, ours and/or any KLM build; writes docs.",
    )
    parser.add_argument("--quick", action="store_true", help=f"{QUICK.skrs} SKRs, short window")
    parser.add_argument("--skrs", type=int, help="SKRs (default 30, quick 6)")
    parser.add_argument("--klm-command", help="another KLM build to run after ours (shell words)")
    parser.add_argument("--klm-crds", type=Path, help="that KLM's CRD folder")
    parser.add_argument("--klm-label", default="--klm-command", help="its column heading")
    parser.add_argument("--without-ours", action="store_true", help="only --klm-command")
    parser.add_argument("--out", type=Path, default=DOCS, help="where to write (default docs/)")
    parser.add_argument(
        "--logs", type=Path, help="keep every process's log here (default: dropped)"
    )
    args = parser.parse_args(argv)
    config = QUICK if args.quick else FULL
    if args.skrs:
        config = replace(config, skrs=args.skrs)
    klms = [] if args.without_ours else [ours()]
    if args.klm_command:
        klms.append(
            KlmUnderTest(args.klm_label, tuple(shlex.split(args.klm_command)), args.klm_crds)
        )
    if not klms:
        parser.error("nothing to run: --without-ours needs --klm-command")
    from harness.bench.suite import versions  # the suite runs this module: import late

    started, load_before = time.monotonic(), loadavg()
    with tempfile.TemporaryDirectory(prefix="klm-scale-") as tmp:
        figures = asyncio.run(measure_all(klms, config, args.logs or Path(tmp)))
    seconds = time.monotonic() - started
    result = klm_scale_result(figures, seconds)
    given = list(sys.argv[1:] if argv is None else argv)
    command = shlex.join(["python", "-m", "harness.bench.klm_scale", *given])
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / PLOT).write_bytes(timeline_png(figures))
    (args.out / "klm-scale.md").write_text(render_document(result, command, seconds))
    meta = RunMeta(command, time.strftime("%Y-%m-%d %H:%M %Z"), os.cpu_count() or 1,
                   load_before, loadavg(), seconds, versions(), args.quick)  # fmt: skip
    (args.out / "klm-scale.json").write_text(render_json([result], meta))
    print("\n".join(table_markdown(result.tables[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
