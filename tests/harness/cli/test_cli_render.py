"""``watcher-harness render``: files and stdout, one PKI for both sets, clear errors."""

from __future__ import annotations

import base64
import stat
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509

from harness.cli import main
from watcher.__main__ import main as watcher_main
from watcher.render.watcher_cr import klm_watcher_dict


def _docs(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d]


def _kinds(docs: list[dict[str, Any]]) -> set[str]:
    return {d["kind"] for d in docs}


def _sans(pem: bytes) -> list[str]:
    cert = x509.load_pem_x509_certificate(pem)
    ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return [
        *ext.get_values_for_type(x509.DNSName),
        *map(str, ext.get_values_for_type(x509.IPAddress)),
    ]


def test_render_into_a_directory_with_generated_pki(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert main(["render", "--kcp-addr", "kcp.example.com:443", "--out", str(out)]) == 0
    skr, kcp = _docs((out / "skr.yaml").read_text()), _docs((out / "kcp.yaml").read_text())
    assert {"Deployment", "ValidatingWebhookConfiguration", "NetworkPolicy"} <= _kinds(skr)
    assert {"CustomResourceDefinition", "Watcher", "VirtualService", "ConfigMap"} <= _kinds(kcp)
    ca = (out / "pki" / "ca.crt").read_bytes()
    assert stat.S_IMODE((out / "pki" / "skr.key").stat().st_mode) == 0o600
    (config,) = [d for d in skr if d["kind"] == "ValidatingWebhookConfiguration"]
    assert base64.b64decode(config["webhooks"][0]["clientConfig"]["caBundle"]) == ca
    (gateway,) = [d for d in kcp if d["kind"] == "Secret"]
    assert base64.b64decode(gateway["data"]["ca.crt"]) == ca
    assert "kcp.example.com" in _sans(base64.b64decode(gateway["data"]["tls.crt"]))
    (secret,) = [d for d in skr if d["kind"] == "Secret"]
    runtime_cert = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["tls.crt"]))
    runtime_cert.verify_directly_issued_by(x509.load_pem_x509_certificate(ca))
    (kyma,) = [d for d in kcp if d["kind"] == "Kyma"]
    assert kyma["metadata"]["labels"]["kyma-project.io/runtime-id"] == "runtime-a"


def test_render_to_stdout_one_set(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["render", "--kcp-addr", "10.0.0.1:30443", "--only", "skr", "--image", "w:dev"]
    assert main(args) == 0
    captured = capsys.readouterr()
    docs = _docs(captured.out)
    assert "CustomResourceDefinition" not in _kinds(docs)
    (deployment,) = [d for d in docs if d["kind"] == "Deployment"]
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == "w:dev"
    assert "generated for this output only" in captured.err


def test_render_with_certs_directory_checks_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    certs = tmp_path / "certs"
    assert watcher_main(["certs", str(certs), "--runtime-id", "rt-7", "--skr-domain", "a.b.c"]) == 0
    capsys.readouterr()
    out = tmp_path / "out"
    # `watcher certs` issues the KCP certificate for 127.0.0.1 / localhost only.
    assert (
        main(["render", "--kcp-addr", "127.0.0.1:8443", "--certs", str(certs), "--out", str(out)])
        == 0
    )
    kcp = _docs((out / "kcp.yaml").read_text())
    (kyma,) = [d for d in kcp if d["kind"] == "Kyma"]
    assert kyma["metadata"]["annotations"] == {"skr-domain": "a.b.c"}
    assert not (out / "pki").exists()
    capsys.readouterr()
    assert main(["render", "--kcp-addr", "kcp.example.com:443", "--certs", str(certs)]) == 2
    err = capsys.readouterr().err
    assert "kcp.crt does not name the KCP host 'kcp.example.com'" in err
    assert (
        main(["render", "--kcp-addr", "127.0.0.1:1", "--certs", str(certs), "--runtime-id", "x"])
        == 2
    )
    assert "skr.crt has CN 'rt-7' but the runtime id is 'x'" in capsys.readouterr().err


def _bad_watcher_file(tmp_path: Path) -> Path:
    broken = klm_watcher_dict()
    broken["spec"]["field"] = "metadata"
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump(broken))
    return path


@pytest.mark.parametrize(
    ("make_args", "message"),
    [
        (lambda p: ["--kcp-addr", "https://kcp:443"], "--kcp-addr"),
        (lambda p: ["--kcp-addr", "k:1", "--certs", str(p / "none")], "no such directory"),
        (lambda p: ["--kcp-addr", "k:1", "--watchers", str(p / "none.yaml")], "--watchers"),
        (lambda p: ["--kcp-addr", "k:1", "--watchers", str(_bad_watcher_file(p))], "spec.field"),
        (lambda p: ["--kcp-addr", "k:1", "--node-port", "80"], "30000..32767"),
        (lambda p: ["--kcp-addr", "k:1", "--image", ""], "image"),
    ],
)
def test_bad_input_exits_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], make_args: Any, message: str
) -> None:
    out = tmp_path / "out"
    assert main(["render", "--out", str(out), *make_args(tmp_path)]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith("watcher-harness render: ")
    assert message in captured.err
    assert "Traceback" not in captured.err
    assert len(captured.err.strip().splitlines()) == 1
    assert not out.exists()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("a: [1, 2\n", "not valid YAML"),
        ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n", "expected Watcher"),
        ("# nothing\n", "holds no Watcher"),
        ("kind: List\nitems: 3\n", "has no items"),
    ],
)
def test_bad_watchers_file_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str, message: str
) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(content)
    assert main(["render", "--kcp-addr", "k:1", "--watchers", str(path)]) == 2
    err = capsys.readouterr().err
    assert message in err and str(path) in err


def test_watchers_from_a_list(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(
        yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [klm_watcher_dict()]})
    )
    assert main(["render", "--kcp-addr", "k:1", "--watchers", str(path), "--only", "kcp"]) == 0
    docs = _docs(capsys.readouterr().out)
    assert [d["metadata"]["name"] for d in docs if d["kind"] == "Watcher"] == ["klm-watcher"]
