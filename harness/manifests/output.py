"""Rendered objects → multi-document YAML, on stdout or as files in a directory."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from watcher import pki


class _Dumper(yaml.SafeDumper):
    """Block style for multi-line strings (the Envoy files in the gateway ConfigMap)."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def dump_yaml(objects: Sequence[Mapping[str, Any]], *, header: str = "") -> str:
    """One YAML document per object, in order; ``header`` becomes a leading comment."""
    body = yaml.dump_all(
        [dict(o) for o in objects],
        Dumper=_Dumper,
        sort_keys=False,
        explicit_start=True,
        default_flow_style=False,
        width=100,
    )
    comment = "".join(f"# {line}\n" if line else "#\n" for line in header.splitlines())
    return comment + body


def write_manifests(
    directory: Path,
    sets: Mapping[str, Sequence[Mapping[str, Any]]],
    *,
    headers: Mapping[str, str] | None = None,
    pki_files: Mapping[str, bytes] | None = None,
) -> list[Path]:
    """``<directory>/<name>.yaml`` per set, and ``<directory>/pki/<file>`` (mode 0600) for
    generated certificate material; each file is written atomically. Returns the paths."""
    directory.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for name, objects in sets.items():
        path = directory / f"{name}.yaml"
        text = dump_yaml(objects, header=(headers or {}).get(name, ""))
        pki.write_atomic(path, text.encode("utf-8"), mode=0o644)
        written.append(path)
    if pki_files:
        for name, data in pki_files.items():
            path = directory / "pki" / name
            path.parent.mkdir(mode=0o700, exist_ok=True)
            pki.write_atomic(path, data, mode=0o600)
            written.append(path)
    return written
