"""``python -m harness.soak`` (``make soak``): run one soak, write the report, exit 0 only
if every criterion held.

Writes ``<docs-dir>/soak.md``, ``soak.json`` and ``soak-rss.png``; process logs go to
``--log-dir``. ``SOAK_DURATION`` (seconds) sets the default duration for short runs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

from harness.soak.config import SoakConfig
from harness.soak.plot import rss_fd_png
from harness.soak.report import render_markdown
from harness.soak.result import SoakResult, to_json
from harness.soak.run import run_soak

PLOT_NAME = "soak-rss.png"


def build_parser() -> argparse.ArgumentParser:
    default = SoakConfig()
    duration = float(os.environ.get("SOAK_DURATION") or default.duration)
    p = argparse.ArgumentParser(prog="python -m harness.soak", description=__doc__.split("\n")[0])
    p.add_argument("--duration", type=float, default=duration, help="seconds of churn")
    p.add_argument("--rate", type=float, default=default.rate, help="writes/s over all SKRs")
    p.add_argument("--skrs", type=int, default=default.skrs)
    p.add_argument("--objects", type=int, default=default.objects, help="per kind and SKR")
    p.add_argument("--seed", type=int, default=default.seed)
    p.add_argument("--interval", type=float, default=default.interval, help="sampling period")
    p.add_argument(
        "--min-warmup", type=float, default=default.min_warmup, help="at least this warm-up (s)"
    )
    p.add_argument("--settle", type=float, default=default.settle, help="max wait for events")
    p.add_argument("--docs-dir", type=Path, default=Path("docs"))
    p.add_argument(
        "--note", action="append", default=[], help="a line for the report's notes (repeatable)"
    )
    p.add_argument("--log-dir", type=Path, default=default.log_dir)
    p.add_argument(
        "--health-interval",
        type=float,
        default=default.health_interval or 0.0,
        help="watcher-health heartbeat interval in seconds (0: off); an alarm fails the run",
    )
    return p


def config_from(args: argparse.Namespace) -> SoakConfig:
    knobs = ("duration", "rate", "skrs", "objects", "seed", "interval", "min_warmup", "settle")
    return SoakConfig(
        **{knob: getattr(args, knob) for knob in knobs},
        log_dir=args.log_dir,
        health_interval=args.health_interval or None,
    )


def write_outputs(
    result: SoakResult, docs_dir: Path, command: str, notes: Sequence[str] = ()
) -> dict[str, object]:
    """Write the three files; returns the JSON document."""
    doc = {**to_json(result, command=command), "notes": list(notes)}
    docs_dir.mkdir(parents=True, exist_ok=True)
    (docs_dir / "soak.json").write_text(json.dumps(doc, indent=1) + "\n")
    (docs_dir / "soak.md").write_text(render_markdown(doc, plot_name=PLOT_NAME))
    title = f"soak: {result.config.rate:g} writes/s for {result.config.duration:g} s"
    png = rss_fd_png(doc["samples"]["by_process"], doc["windows_s"], title=title)
    (docs_dir / PLOT_NAME).write_bytes(png)
    return doc


def describe_command(args: Sequence[str]) -> str:
    """How this run was started, for the report (``make soak`` when make ran it); notes
    are left out (they are printed in the report anyway)."""
    args = _without_notes(args)
    if os.environ.get("MAKELEVEL"):
        duration = os.environ.get("SOAK_DURATION")
        parts = [f"SOAK_DURATION={duration}"] if duration else []
        parts += ["make", "soak"]
        if args:
            parts.append(f"SOAK_ARGS={shlex.quote(shlex.join(args))}")
        return " ".join(parts)
    return shlex.join(["python", "-m", "harness.soak", *args])


def _without_notes(args: Sequence[str]) -> list[str]:
    out: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg == "--note":
            skip = True
        elif not arg.startswith("--note="):
            out.append(arg)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        config = config_from(args)
        config.checked_windows()  # the duration and sampling, before anything starts
    except ValueError as exc:
        print(f"soak: {exc}", file=sys.stderr)
        return 2
    command = describe_command(sys.argv[1:] if argv is None else list(argv))
    result = asyncio.run(run_soak(config))
    doc = write_outputs(result, args.docs_dir, command, args.note)
    for c in result.criteria:
        print(f"{'ok  ' if c.ok else 'FAIL'} {c.name}: {c.actual} (expected {c.expected})")
    print(f"soak: {'PASSED' if doc['passed'] else 'FAILED'}; report: {args.docs_dir / 'soak.md'}")
    return 0 if doc["passed"] else 1
