"""The Python side of the scale benchmark's Go load generator (``tools/event-load``): its
command line, identities file, result parsing, the choice of generator, and running a
stand-in program as one (no Go needed; the real program runs in
``test_event_load_go_e2e.py``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.bench.event_load import (
    GENERATOR_ENV,
    EventLoadError,
    Identity,
    LoadGenerator,
    choose_load_generator,
    command,
    go_duration,
    identities_json,
    parse_result,
    run_event_load,
)
from harness.errors import BinaryUnavailable

RESULT: dict[str, Any] = {
    "events": 9,
    "seconds": 0.012,
    "events_per_s": 750.0,
    "latency_ms": {"count": 9, "p50": 1.2, "p99": 3.4, "max": 3.4},
    "statuses": {"200": 6, "503": 3},
    "protocols": {"HTTP/1.1": 9},
    "complete": True,
    "requested": 9,
    "identities": 3,
    "in_flight": 2,
    "cpu_s": 0.004,
    "cpu_ms_per_event": 0.444,
    "cpu_of": {"listener": 0.01, "envoy": None},
    "warmup": {
        "events": 3,
        "seconds": 0.02,
        "events_per_s": 150.0,
        "latency_ms": {"count": 3, "p50": 5.0, "p99": 6.0, "max": 6.0},
        "statuses": {"200": 3},
        "protocols": {"HTTP/1.1": 3},
        "complete": True,
    },
}


def test_identities_file_lists_cert_key_and_ca() -> None:
    text = identities_json([Identity("a.crt", "a.key", "ca.crt"), Identity("b.crt", "b.key", "ca")])
    assert json.loads(text) == [
        {"cert": "a.crt", "key": "a.key", "ca": "ca.crt"},
        {"cert": "b.crt", "key": "b.key", "ca": "ca"},
    ]


def test_durations_are_whole_milliseconds() -> None:
    assert go_duration(90) == "90000ms"
    assert go_duration(0.5) == "500ms"
    assert go_duration(1e-6) == "1ms"
    for bad in (0, -1, float("inf"), float("nan")):
        with pytest.raises(ValueError):
            go_duration(bad)


def test_command_passes_every_setting() -> None:
    argv = command(
        Path("/bin/event-load"),
        url="https://127.0.0.1:1/v2/x/event",
        identities_file=Path("/tmp/ids.json"),
        body_file=Path("/tmp/body"),
        count=12000,
        in_flight=64,
        budget_s=90,
        warmup=200,
        warmup_budget_s=120,
        conns_per_identity=4,
        cpu_of={"listener": 11, "envoy": 12},
    )
    flags = dict(zip(argv[1:-4:2], argv[2:-4:2], strict=True))
    assert argv[0] == "/bin/event-load"
    assert flags == {
        "-url": "https://127.0.0.1:1/v2/x/event",
        "-identities": "/tmp/ids.json",
        "-body": "/tmp/body",
        "-count": "12000",
        "-in-flight": "64",
        "-budget": "90000ms",
        "-warmup": "200",
        "-warmup-budget": "120000ms",
        "-conns-per-identity": "4",
    }
    assert argv[-4:] == ["-cpu-of", "listener=11", "-cpu-of", "envoy=12"]


def test_result_line_is_parsed_and_checked() -> None:
    line = json.dumps(RESULT)
    assert parse_result(f"\n{line}\n") == RESULT


@pytest.mark.parametrize(
    ("stdout", "message"),
    [
        ("", "printed 0 lines"),
        ('{"events": 1}\n{"events": 2}\n', "printed 2 lines"),
        ("not json\n", "printed no JSON"),
        ("[1, 2]\n", "printed list"),
        (json.dumps({**RESULT, "events": "9"}), "field 'events'"),
        (json.dumps({**RESULT, "events": True}), "field 'events'"),
        (json.dumps({**RESULT, "complete": 1}), "field 'complete'"),
        (json.dumps({k: v for k, v in RESULT.items() if k != "cpu_s"}), "field 'cpu_s'"),
        (json.dumps({**RESULT, "warmup": {"events": 3}}), "warm-up: field 'seconds'"),
        (json.dumps({**RESULT, "statuses": {"200": "6"}}), "statuses are not counts"),
    ],
)
def test_malformed_results_are_refused_with_the_reason(stdout: str, message: str) -> None:
    with pytest.raises(EventLoadError, match=message):
        parse_result(stdout)


def _unavailable() -> Path:
    raise BinaryUnavailable("no Go toolchain was found")


def test_go_is_chosen_when_it_can_be_built() -> None:
    built = Path("/cache/bin/event-load-abc")
    for env in ({}, {GENERATOR_ENV: "go"}, {GENERATOR_ENV: " Go "}):
        chosen = choose_load_generator(env, ensure=lambda: built)
        assert chosen == LoadGenerator(built) and chosen.name == "go"


def test_without_go_aiohttp_runs_and_says_why() -> None:
    chosen = choose_load_generator({}, ensure=_unavailable)
    assert chosen.name == "aiohttp" and chosen.reason == "no Go toolchain was found"


def test_asking_for_go_without_go_fails() -> None:
    with pytest.raises(BinaryUnavailable):
        choose_load_generator({GENERATOR_ENV: "go"}, ensure=_unavailable)


def test_asking_for_aiohttp_does_not_build() -> None:
    chosen = choose_load_generator({GENERATOR_ENV: "aiohttp"}, ensure=_unavailable)
    assert chosen == LoadGenerator(None, f"{GENERATOR_ENV}=aiohttp")


def test_an_unknown_generator_is_refused() -> None:
    with pytest.raises(ValueError, match="want one of go, aiohttp"):
        choose_load_generator({GENERATOR_ENV: "wrk"}, ensure=_unavailable)


def _stand_in(tmp_path: Path, script: str) -> Path:
    path = tmp_path / "event-load"
    path.write_text(f"#!/bin/sh\n{script}\n")
    path.chmod(0o755)
    return path


async def test_running_a_generator_returns_its_result(tmp_path: Path) -> None:
    (tmp_path / "result.json").write_text(json.dumps(RESULT))
    binary = _stand_in(tmp_path, f'echo starting >&2; cat "{tmp_path / "result.json"}"')
    log = tmp_path / "event-load.log"
    assert await run_event_load([str(binary)], log_path=log, within_s=30) == RESULT
    assert "starting" in log.read_text()


async def test_a_generator_refusing_its_input_is_an_error_with_its_message(
    tmp_path: Path,
) -> None:
    binary = _stand_in(tmp_path, 'echo "event-load: -count must be in 1..10000000" >&2; exit 2')
    with pytest.raises(EventLoadError, match=r"exited with code 2: .*-count must be in"):
        await run_event_load([str(binary)], log_path=tmp_path / "log", within_s=30)


async def test_a_generator_past_its_time_is_stopped(tmp_path: Path) -> None:
    binary = _stand_in(tmp_path, "exec sleep 30")
    with pytest.raises(EventLoadError, match="did not finish within 0 s"):
        await run_event_load([str(binary)], log_path=tmp_path / "log", within_s=0.2)
