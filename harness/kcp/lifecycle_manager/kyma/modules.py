"""Which Manifests a Kyma needs, from the SKR Kyma's ``spec.modules`` and the catalog. Pure.

KLM's order (klm-reference §2.4): channel → version through the ModuleReleaseMeta, then the
ModuleTemplate; an unknown module or channel is an ``Error`` entry while the others
proceed. Our Manifests are ``<kyma>-<module>`` (KLM appends a hash); a ModuleTemplate
annotated ``INSTALL_ANNOTATION: fail`` is the harness's "broken module" fixture.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from watcher.domain import (
    BETA_LABEL,
    INTERNAL_LABEL,
    KCP_NAMESPACE,
    KYMA_NAME_LABEL,
    LIFECYCLE_MANAGER,
    MANAGED_BY_LABEL,
    MODULE_NAME_LABEL,
)

API_VERSION: Final = "operator.kyma-project.io/v1beta2"
INSTALL_ANNOTATION: Final = "harness.kyma-project.io/install"
"""On a ModuleTemplate (copied to its Manifests): ``fail`` makes the install fail."""

Obj = Mapping[str, Any]


def _labels(obj: Obj) -> Mapping[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def catalog_visible(entry: Obj, kyma: Obj) -> bool:
    """Whether a catalog object (ModuleTemplate, ModuleReleaseMeta) reaches ``kyma``: an
    internal or beta one only reaches Kymas that carry the same label."""
    mine, theirs = _labels(entry), _labels(kyma)
    return all(mine.get(label) != "true" or theirs.get(label) == "true"
               for label in (INTERNAL_LABEL, BETA_LABEL))  # fmt: skip


@dataclass(frozen=True)
class Catalog:
    """The KCP's module catalog as one Kyma sees it."""

    templates: Mapping[tuple[str, str], Obj]
    """(module, version) → ModuleTemplate."""
    channels: Mapping[str, Mapping[str, str]]
    """module → channel → version (from ModuleReleaseMeta)."""

    @classmethod
    def build(cls, templates: Iterable[Obj], metas: Iterable[Obj], kyma: Obj) -> Catalog:
        by_version = {
            (t["spec"]["moduleName"], t["spec"]["version"]): t
            for t in templates
            if catalog_visible(t, kyma)
        }
        channels = {
            m["spec"]["moduleName"]: {c["channel"]: c["version"] for c in m["spec"]["channels"]}
            for m in metas
            if catalog_visible(m, kyma)
        }
        return cls(by_version, channels)


@dataclass(frozen=True)
class ModulePlan:
    """One requested module, resolved (``template`` set) or not (``error`` says why)."""

    name: str
    channel: str
    managed: bool = True
    version: str = ""
    template: Obj | None = None
    error: str = ""


def requested_modules(skr_spec: Obj) -> list[tuple[str, str, bool]]:
    """(name, channel, managed) per ``spec.modules`` entry; a later duplicate is ignored
    (KLM's CRD keys the list by name)."""
    default = str(skr_spec.get("channel") or "regular")
    seen: set[str] = set()
    out = []
    for entry in skr_spec.get("modules") or []:
        if not isinstance(entry, Mapping) or not entry.get("name") or entry["name"] in seen:
            continue
        seen.add(entry["name"])
        out.append((str(entry["name"]), str(entry.get("channel") or default),
                    entry.get("managed", True) is not False))  # fmt: skip
    return out


def plan_modules(skr_spec: Obj, catalog: Catalog) -> list[ModulePlan]:
    """Resolve every requested module through the catalog (see the module doc)."""
    plans = []
    for name, channel, managed in requested_modules(skr_spec):
        channels = catalog.channels.get(name)
        if channels is None:
            plans.append(ModulePlan(name, channel, managed, error=f"module {name} not found"))
            continue
        version = channels.get(channel)
        if version is None:
            known = ", ".join(sorted(channels)) or "none"
            error = f"module {name} has no channel {channel} (channels: {known})"
            plans.append(ModulePlan(name, channel, managed, error=error))
            continue
        template = catalog.templates.get((name, version))
        if template is None:
            error = f"no ModuleTemplate for module {name} version {version}"
            plans.append(ModulePlan(name, channel, managed, version, error=error))
            continue
        plans.append(ModulePlan(name, channel, managed, version, template))
    return plans


def manifest_name(kyma: str, module: str) -> str:
    return f"{kyma}-{module}"


def desired_manifest(kcp_kyma: Obj, plan: ModulePlan) -> dict[str, Any]:
    """The Manifest for a resolved module: owned by the KCP Kyma, labelled as KLM does."""
    assert plan.template is not None, "only resolved modules get a Manifest"
    meta = kcp_kyma["metadata"]
    template_meta = plan.template["metadata"]
    annotations = {
        k: v for k, v in (template_meta.get("annotations") or {}).items() if k == INSTALL_ANNOTATION
    }
    return {
        "apiVersion": API_VERSION,
        "kind": "Manifest",
        "metadata": {
            "name": manifest_name(meta["name"], plan.name),
            "namespace": KCP_NAMESPACE,
            "labels": {
                KYMA_NAME_LABEL: meta["name"],
                MODULE_NAME_LABEL: plan.name,
                MANAGED_BY_LABEL: LIFECYCLE_MANAGER,
            },
            "annotations": annotations,
            "ownerReferences": [
                {
                    "apiVersion": API_VERSION,
                    "kind": "Kyma",
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "version": plan.version,
            "channel": plan.channel,
            "managed": plan.managed,
            "template": {"name": template_meta["name"], "namespace": template_meta["namespace"]},
        },
    }


def stale_manifests(existing: Sequence[Obj], plans: Sequence[ModulePlan]) -> list[str]:
    """Names of the Kyma's Manifests whose module is no longer requested (or resolvable)."""
    wanted = {p.name for p in plans if p.template is not None}
    return sorted(
        m["metadata"]["name"] for m in existing if _labels(m).get(MODULE_NAME_LABEL) not in wanted
    )


def catalog_fixture(
    module: str,
    channels: Mapping[str, str],
    *,
    install_fails: bool = False,
    labels: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """A module for the KCP catalog, as a scenario declares it: a ModuleTemplate per
    version, then the ModuleReleaseMeta mapping ``channels`` (channel → version)."""
    annotations = {INSTALL_ANNOTATION: "fail"} if install_fails else {}
    out: list[dict[str, Any]] = [
        {
            "apiVersion": API_VERSION,
            "kind": "ModuleTemplate",
            "metadata": {
                "name": f"{module}-{version}",
                "namespace": KCP_NAMESPACE,
                "labels": dict(labels or {}),
                "annotations": annotations,
            },
            "spec": {"moduleName": module, "version": version},
        }
        for version in sorted(set(channels.values()))
    ]
    release = [{"channel": c, "version": v} for c, v in sorted(channels.items())]
    out.append(
        {
            "apiVersion": API_VERSION,
            "kind": "ModuleReleaseMeta",
            "metadata": {"name": module, "namespace": KCP_NAMESPACE, "labels": dict(labels or {})},
            "spec": {"moduleName": module, "channels": release},
        }
    )
    return out
