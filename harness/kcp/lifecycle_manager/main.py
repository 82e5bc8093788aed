"""``watcher-klm``: our Lifecycle Manager as a process of its own, set up as KLM's
``cmd/main.go`` sets up upstream's.

It takes KLM's flag names (:class:`harness.kcp.klm_process.KlmFlags`) and shows itself only
as upstream's does — API objects, a zap-style JSON log, metrics and ``/readyz`` — and needs
the platform a KCP has (cert-manager, KLM's CA and Gateway, a kubelet per SKR), which the
harness plays (:mod:`harness.environment.any_klm`).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import logging
import signal
import sys
from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack
from typing import Any, Final

from aiohttp import web
from kubernetes_asyncio.config import ConfigException, new_client_from_config
from prometheus_client import Counter, Gauge, generate_latest

from harness.durations import parse_duration
from harness.kcp.lifecycle_manager.certificates.cert_manager_client import (
    CertManagerCertificates,
)
from harness.kcp.lifecycle_manager.certificates.gateway_from_ca import (
    setup_gateway_secret_from_ca,
)
from harness.kcp.lifecycle_manager.kyma.reconcile import KymaReconcile
from harness.kcp.lifecycle_manager.kyma.skr_access import SkrClients
from harness.kcp.lifecycle_manager.manager import COMPONENT, LifecycleManager
from harness.kcp.lifecycle_manager.manifest_controller import setup_manifest_controller
from harness.kcp.lifecycle_manager.metrics import KlmMetrics
from harness.kcp.lifecycle_manager.queue.reconciler import (
    INTERVAL_FLAGS,
    Outcome,
    Reconcile,
    RequeueIntervals,
)
from harness.kcp.lifecycle_manager.skr_deployment import SkrDeployment
from harness.kcp.lifecycle_manager.watcher_controller import setup_watcher_controller
from watcher.exposition import UpstreamExposition
from watcher.listener import ListenerConfig

logger = logging.getLogger("harness.kcp.lifecycle_manager")

RESULTS: Final = {Outcome.ERROR: "error", Outcome.SUCCESS: "requeue_after"}


def _duration(text: str) -> float:
    try:
        return parse_duration(text).total_seconds()
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _address(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not <host>:<port>")
    return host.strip("[]") or "0.0.0.0", int(port)


def parser() -> argparse.ArgumentParser:
    """KLM's flags (the subset this KLM serves); others are refused by name."""
    p = argparse.ArgumentParser(prog="watcher-klm", description=__doc__.split("\n\n")[0])
    p.add_argument("--kubeconfig", required=True, help="the KCP's kubeconfig")
    p.add_argument("--leader-elect", default="false", help="accepted; only false is served")
    p.add_argument("--metrics-bind-address", type=_address, default=("127.0.0.1", 8080))
    p.add_argument("--health-probe-bind-address", type=_address, default=("127.0.0.1", 8081))
    p.add_argument("--kyma-skr-listener-bind-address", type=_address, default=("127.0.0.1", 8082))
    p.add_argument("--log-level", type=int, default=0, help="2 or more: reconcile lines")
    p.add_argument("--skr-watcher-image-tag", default="latest")
    p.add_argument("--oci-registry-host", default="", help="accepted; modules come from the KCP")
    for field, flag in INTERVAL_FLAGS.items():
        default = getattr(RequeueIntervals(), field)
        p.add_argument(flag, type=_duration, default=default, metavar="DURATION")
    p.add_argument("--max-concurrent-kyma-reconciles", type=int, default=1)
    p.add_argument(
        "--watch-event-settle",
        type=_duration,
        default=0.0,
        metavar="DURATION",
        help="ours: wait this long before reconciling a Kyma an SKR event queued (default 0)",
    )
    return p


class ZapJson(logging.Formatter):
    """One JSON object per line, shaped like upstream KLM's zap output."""

    def format(self, record: logging.LogRecord) -> str:
        stamp = dt.datetime.fromtimestamp(record.created, dt.UTC)
        line: dict[str, Any] = {
            "level": record.levelname,
            "date": stamp.isoformat(timespec="microseconds").replace("+00:00", "Z"),
            "logger": record.name,
            "msg": record.getMessage(),
            "context": dict(getattr(record, "context", {}) or {}),
        }
        if record.exc_info:
            line["context"]["stacktrace"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str)


def configure_logging(level: int) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(ZapJson())
    logging.basicConfig(level=logging.WARNING, handlers=[handler], force=True)
    logger.setLevel(logging.INFO if level >= 2 else logging.WARNING)
    logging.getLogger("harness.kcp.lifecycle_manager.manager").setLevel(logging.INFO)


async def _serve(
    stack: AsyncExitStack, address: tuple[str, int], routes: Mapping[str, Any]
) -> None:
    app = web.Application()
    for path, handler in routes.items():
        app.router.add_get(path, handler)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    stack.push_async_callback(runner.cleanup)
    await web.TCPSite(runner, *address).start()


def controller_metrics(klm: LifecycleManager, metrics: KlmMetrics) -> None:
    """controller-runtime's reconcile counter and queue depth of the Kyma controller."""
    reconciles = Counter(
        "controller_runtime_reconcile_total",
        "Total number of reconciliations per controller",
        ["controller", "result"],
        registry=metrics.registry,
    )

    def count(record: Reconcile) -> None:
        result = RESULTS.get(record.outcome, "success")
        reconciles.labels(controller="kyma", result=result).inc()

    klm.reconciler.observers.append(count)
    depth = Gauge(
        "workqueue_depth",
        "Current depth of workqueue",
        ["name", "controller", "priority"],
        registry=metrics.registry,
    )
    depth.labels(name="kyma", controller="kyma", priority="").set_function(
        lambda: klm.reconciler.depth
    )


async def run(args: argparse.Namespace, stop: asyncio.Event) -> None:
    given = {
        field: getattr(args, flag[2:].replace("-", "_")) for field, flag in INTERVAL_FLAGS.items()
    }
    intervals = RequeueIntervals(**given)
    listen_host, listen_port = args.kyma_skr_listener_bind_address
    async with AsyncExitStack() as stack:
        api = await new_client_from_config(config_file=args.kubeconfig, persist_config=False)
        stack.push_async_callback(api.close)
        metrics = KlmMetrics()
        skrs = SkrClients(api)
        stack.push_async_callback(skrs.aclose)
        klm = LifecycleManager(
            api,
            metrics=metrics,
            workers=args.max_concurrent_kyma_reconciles,
            listener_config=ListenerConfig(
                component=COMPONENT, identity="xfcc", host=listen_host, port=listen_port
            ),
            pin_san=True,
            intervals=intervals,
            event_settle=args.watch_event_settle,
        )
        setup_gateway_secret_from_ca(klm)
        watchers = setup_watcher_controller(klm)
        deployment = SkrDeployment(
            CertManagerCertificates(api, metrics=metrics),
            skrs,
            watchers=watchers.watchers,
            image_tag=args.skr_watcher_image_tag,
        )
        klm.reconcile = KymaReconcile(api, skrs, watcher=deployment)
        setup_manifest_controller(klm, klm.reconciler)
        controller_metrics(klm, metrics)
        await stack.enter_async_context(klm)

        async def exposition(_: web.Request) -> web.Response:
            body = generate_latest(UpstreamExposition(metrics.registry))
            return web.Response(body=body, content_type="text/plain")

        async def probe(_: web.Request) -> web.Response:
            return web.Response(text="ok")

        await _serve(stack, args.metrics_bind_address, {"/metrics": exposition})
        await _serve(stack, args.health_probe_bind_address, {"/readyz": probe, "/healthz": probe})
        logger.warning("watcher-klm started; SKR events on %s:%d", listen_host, listen_port)
        await stop.wait()
        logger.warning("watcher-klm stopping")


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.leader_elect not in ("false", "False", "0"):
        print("watcher-klm: only --leader-elect=false is served (one replica)", file=sys.stderr)
        return 2
    configure_logging(args.log_level)

    async def serve() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        await run(args, stop)

    try:
        asyncio.run(serve())
    except ConfigException as exc:
        print(f"watcher-klm: --kubeconfig {args.kubeconfig}: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:  # a bind address taken or not here
        print(f"watcher-klm: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
