"""``watcher-harness get`` / ``python -m harness.cli.get``: arguments, errors, exit codes.

No cluster here except in the e2e test at the end: an unreachable one is a closed loopback
port, a malformed kubeconfig a file of the wrong shape.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.cli import main
from harness.cli.get import SHORTHANDS, Target, add_arguments, target
from harness.cli.get import main as get_main
from harness.clusters.binaries import Binaries
from harness.scenario.values import KINDS


@pytest.fixture
def kubeconfig(tmp_path: Path) -> Path:
    """A kubeconfig whose server is a closed loopback port (nothing listens there)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    path = tmp_path / "kubeconfig"
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": f"https://127.0.0.1:{port}"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    return path


def usage_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """Run ``get argv``; assert exit 2 with the usage; the error line."""
    assert get_main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: watcher-harness get"), err
    assert "Traceback" not in err
    return err.strip().splitlines()[-1]


def test_shorthands_are_the_scenario_kinds() -> None:
    assert list(SHORTHANDS) == list(KINDS)
    for plural, (group, version, resource) in KINDS.items():
        r = SHORTHANDS[plural]
        assert (r.group, r.version, r.plural) == (group, version, resource)
    assert [p for p, r in SHORTHANDS.items() if not r.namespaced] == ["namespaces"]


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        ([], "give RESOURCE, an API path, or --api-version and --kind"),
        (["pods"], "unknown resource 'pods'; use one of kymas, watchers"),
        (["kymas", "default"], "kymas are namespaced: give -n NAMESPACE with NAME"),
        (["--kind", "Deployment"], "--api-version and --kind go together"),
        (["--api-version", "v1", "--kind", "Pod", "a", "b"], "unexpected argument 'b'"),
        (["/api/v1/namespaces", "x"], "an API path says the namespace and name itself"),
        (["/api/v1/namespaces", "-n", "x"], "an API path says the namespace and name itself"),
        (["namespaces", "a", "-l", "k=v"], "-l selects a list: give no NAME"),
        (["namespaces", "--query", "a["], "--query: invalid JMESPath 'a['"),
        (["namespaces", "--query", "nope(@)"], "unknown function nope()"),
        (["namespaces"], "which cluster? give --cluster NAME or --kubeconfig FILE"),
        (["namespaces", "--kubeconfig", "/nonexistent/kc"], "kubeconfig /nonexistent/kc: no "),
        (["namespaces", "--kubeconfig", "k", "--cluster", "kcp"], "--kubeconfig names the"),
    ],
)
def test_wrong_arguments_exit_2_with_the_usage(
    capsys: pytest.CaptureFixture[str], argv: list[str], error: str
) -> None:
    assert error in usage_error(capsys, argv)


def test_cluster_reads_its_script_variable(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in [k for k in os.environ if k.startswith("KUBECONFIG_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("KUBECONFIG_KCP", "/nonexistent/kcp")
    line = usage_error(capsys, ["--cluster", "skr-b", "namespaces"])
    assert "$KUBECONFIG_SKR_B is not set (set here: KUBECONFIG_KCP)" in line
    # the variable is read: its file does not exist
    assert "kubeconfig /nonexistent/kcp: no such file" in usage_error(
        capsys, ["--cluster", "kcp", "namespaces"]
    )


def test_env_that_is_not_up_is_named(
    capsys: pytest.CaptureFixture[str], own_harness_cache: Path
) -> None:
    line = usage_error(capsys, ["--env", "nothing-here", "--cluster", "kcp", "namespaces"])
    assert "--env nothing-here: no such environment is up" in line


def test_unreachable_cluster_is_one_line_exit_1(
    capsys: pytest.CaptureFixture[str], kubeconfig: Path
) -> None:
    assert main(["get", "--kubeconfig", str(kubeconfig), "namespaces", "default"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot reach the cluster" in err, err


def test_malformed_kubeconfig_is_one_line_exit_1(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    bad = tmp_path / "kc"
    bad.write_text("just text\n")
    assert get_main(["--kubeconfig", str(bad), "namespaces"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"kubeconfig {bad} is not usable" in err, err


def test_targets() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)

    def parsed(*argv: str) -> Target:
        return target(parser.parse_args(argv))

    assert parsed("/api/v1/namespaces?limit=1", "-l", "a=b") == Target(
        path="/api/v1/namespaces", query=(("limit", "1"), ("labelSelector", "a=b"))
    )
    kyma = parsed("kymas", "default", "-n", "kyma-system")
    assert (kyma.resource, kyma.name, kyma.namespace) == (
        SHORTHANDS["kymas"],
        "default",
        "kyma-system",
    )
    assert kyma.describe() == "kymas kyma-system/default"
    typed = parsed("--api-version", "apps/v1", "--kind", "Deployment", "-l", "app=x")
    assert (typed.api_version, typed.kind, typed.name, typed.selector) == (
        "apps/v1",
        "Deployment",
        None,
        "app=x",
    )


def test_module_entry_point_runs_without_warnings() -> None:
    """What ``${{ harness.get }}`` runs: exit 2 with the usage, nothing else on stderr."""
    done = subprocess.run(
        [sys.executable, "-W", "error", "-m", "harness.cli.get"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.startswith("usage: watcher-harness get"), done.stderr
    assert "Warning" not in done.stderr and "Traceback" not in done.stderr


async def harness_get(*argv: str, env: dict[str, str]) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "harness.cli.get",
        *argv,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


@pytest.mark.e2e
async def test_reads_a_real_cluster(cluster_binaries: Binaries, tmp_path: Path) -> None:
    from harness.clusters.plane import LocalBackend

    started = time.monotonic()
    async with LocalBackend(cluster_binaries, log_dir=tmp_path / "logs").start(["kcp"]) as env:
        kcp = env["kcp"]
        variables = {**os.environ, "KUBECONFIG_KCP": str(kcp.kubeconfig)}
        code, out, err = await harness_get(
            "--cluster", "kcp", "namespaces", "default", env=variables
        )
        assert code == 0, err
        assert json.loads(out)["metadata"]["name"] == "default"

        code, out, err = await harness_get(
            "--kubeconfig",
            str(kcp.kubeconfig),
            "--api-version",
            "v1",
            "--kind",
            "Namespace",
            "--query",
            "items[].metadata.name",
            env=variables,
        )
        assert code == 0, err
        assert "kube-system" in json.loads(out)

        code, out, err = await harness_get(
            "--cluster", "kcp", "secrets", "missing", "-n", "default", env=variables
        )
        assert (code, out) == (1, "")
        assert err == "watcher-harness get: kcp: secrets default/missing: not found\n"
    print(f"e2e get: {time.monotonic() - started:.1f} s")
