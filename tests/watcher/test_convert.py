"""``python -m watcher convert``: one JSON object on success, one line and exit 2 otherwise."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from watcher.__main__ import main

REVIEW = {
    "apiVersion": "admission.k8s.io/v1",
    "kind": "AdmissionReview",
    "request": {
        "uid": "u1",
        "operation": "CREATE",
        "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
        "object": {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "a", "namespace": "d"},
        },
    },
}


def test_convert_prints_decision(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "review.json"
    path.write_text(json.dumps(REVIEW))
    assert main(["convert", str(path), "--manager", "mgr"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out == {
        "send": True,
        "path": "/v2/mgr/event",
        "body": {
            "watched": {"Namespace": "d", "Name": "a"},
            "watchedGvk": {"group": "", "version": "v1", "kind": "ConfigMap"},
        },
        "message": "send event for d/a to KCP",
        "reason": "created",
    }


def test_convert_accepts_yaml_v1_contract_and_legacy_owner(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import yaml

    path = tmp_path / "review.yaml"
    path.write_text(yaml.safe_dump(REVIEW))
    assert main(["convert", str(path), "--contract", "v1"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["send"] is True and out["path"].startswith("/v1/") and "owner" not in out["body"]
    assert main(["convert", str(path), "--legacy-owner"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["send"] is False and out["reason"] == "unknown-owner" and out["body"] is None


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ("not json {", "not JSON"),
        ("[1]", "JSON object"),
        ('{"kind": "AdmissionReview"}', "apiVersion"),
    ],
)
def test_invalid_input_exits_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, fragment: str
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    assert main(["convert", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and fragment in err and "Traceback" not in err


def test_bad_manager_and_missing_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["convert", "-", "--manager", "../etc"]) == 2
    assert main(["convert", "/nonexistent/file.json"]) == 2
    err = capsys.readouterr().err
    assert "DNS label" in err and "cannot read" in err


def test_stdin_as_subprocess() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "watcher", "convert", "-"],
        input=json.dumps(REVIEW),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["send"] is True
    bad = subprocess.run(
        [sys.executable, "-m", "watcher", "convert", "-"],
        input="\x00garbage",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert bad.returncode == 2 and "Traceback" not in bad.stderr


def test_certs_command_writes_a_usable_set(tmp_path: Path) -> None:
    from watcher.listener import runtime_id
    from watcher.pki import load_certificates

    assert main(["certs", str(tmp_path / "pki"), "--runtime-id", "rt-1"]) == 0
    names = sorted(p.name for p in (tmp_path / "pki").iterdir())
    assert names == ["ca.crt", "kcp.crt", "kcp.key", "skr.crt", "skr.key"]
    (skr,) = load_certificates((tmp_path / "pki" / "skr.crt").read_bytes())
    assert runtime_id(skr) == "rt-1"


def test_certs_command_reports_unwritable_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert main(["certs", str(blocker / "pki")]) == 2
    assert "cannot write" in capsys.readouterr().err
