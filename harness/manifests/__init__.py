"""Installable manifests on the harness side: inputs from files, YAML out, apply in order.

``inputs`` turns what a user has (a watchers file, a ``python -m watcher certs`` directory,
or nothing: a fresh PKI) into the parameters of ``watcher.render``'s pure
``render_skr_manifests`` / ``render_kcp_manifests``; ``output`` writes the objects as
multi-document YAML; ``apply`` sends them to an API server (server-side apply, optionally
as a dry run) in the order they were rendered.
"""

from harness.manifests.inputs import (
    CERT_FILES,
    ManifestInputs,
    Pki,
    build_inputs,
    fixture_crds,
    generate_pki,
    load_pki,
    load_watchers,
)
from harness.manifests.output import dump_yaml, write_manifests

__all__ = [
    "CERT_FILES",
    "ManifestInputs",
    "Pki",
    "build_inputs",
    "dump_yaml",
    "fixture_crds",
    "generate_pki",
    "load_pki",
    "load_watchers",
    "write_manifests",
]
