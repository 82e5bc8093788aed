"""``python -m watcher convert``: show what the webhook would do with one AdmissionReview.

A debugging aid for operator authors: feed it a review captured from an API server (or
written by hand) and it prints the decision as one JSON object. Input that is not an
AdmissionReview exits 2 with one line that says what is wrong.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TextIO

from watcher.decide import Reason, decide
from watcher.model import CONTRACTS, Contract, event_to_json
from watcher.paths import event_path, validate_manager_name

EXIT_INVALID_INPUT = 2


def convert(
    review: Any, *, manager: str, contract: Contract, legacy_owner: bool = False
) -> dict[str, Any]:
    """The printed object for a decoded review (pure)."""
    decision = decide(review, manager=manager, legacy_owner=legacy_owner)
    if decision.reason is Reason.INVALID_REVIEW:
        raise ValueError(decision.message)
    return {
        "send": decision.send,
        "path": event_path(contract, manager),
        "body": event_to_json(decision.event) if decision.event else None,
        "message": decision.message,
        "reason": str(decision.reason),
    }


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("convert", help="decide what the webhook does with one AdmissionReview")
    p.add_argument("file", help="AdmissionReview JSON (or YAML) file, or - for standard input")
    p.add_argument("--manager", default="lifecycle-manager", help="manager in /validate/<manager>")
    p.add_argument("--contract", choices=CONTRACTS, default="v2", help="KCP_CONTRACT (the path)")
    p.add_argument(
        "--legacy-owner",
        action="store_true",
        help="WATCHER_LEGACY_OWNER: the owner field of upstream before 2.1",
    )


def run(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    try:
        validate_manager_name(args.manager)
    except ValueError as exc:
        print(f"watcher convert: --manager: {exc}", file=stderr)
        return EXIT_INVALID_INPUT
    try:
        text = sys.stdin.read() if args.file == "-" else _read(args.file)
    except OSError as exc:
        print(f"watcher convert: cannot read {args.file}: {exc.strerror}", file=stderr)
        return EXIT_INVALID_INPUT
    try:
        review = _load(text)
        result = convert(
            review, manager=args.manager, contract=args.contract, legacy_owner=args.legacy_owner
        )
    except ValueError as exc:
        print(f"watcher convert: {args.file}: not a valid AdmissionReview: {exc}", file=stderr)
        return EXIT_INVALID_INPUT
    print(json.dumps(result, sort_keys=False), file=stdout)
    return 0


def _read(path: str) -> str:
    with open(path, encoding="utf-8", errors="strict") as fh:
        return fh.read()


def _load(text: str) -> Any:
    """JSON first (the wire format); YAML for hand-written reviews."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as json_error:
        import yaml

        try:
            loaded = yaml.safe_load(text)
        except yaml.YAMLError:
            raise ValueError(f"not JSON ({json_error})") from None
        if not isinstance(loaded, dict):
            raise ValueError(f"not JSON ({json_error})") from None
        return loaded
    except RecursionError:
        raise ValueError("nested too deeply") from None
