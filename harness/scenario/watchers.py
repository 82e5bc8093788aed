"""``watchers`` and ``listeners``: which SKR changes go to which manager, and who listens.

A Watcher entry is either ``{default: true}`` (KLM's ``kcp-system/klm-watcher``: Kyma spec
changes labelled ``watched-by: kyma`` → ``lifecycle-manager``) or a full Watcher.
The lifecycle-manager listener always exists; ``listeners`` adds other managers.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import Discriminator, Field, Tag, model_validator

from harness.scenario.values import RESOURCE_SCHEMA_EXTRA, DnsLabel, Labels, Model, Resource
from watcher.domain import KCP_NAMESPACE, MANAGED_BY_LABEL
from watcher.errors import InvalidWatcher
from watcher.render.watcher_cr import klm_watcher_dict, parse_watcher, watcher_dict

KLM_COMPONENT = "lifecycle-manager"
KLM_WATCHER = "klm-watcher"


class Service(Model):
    """A KCP service a Watcher routes to (``serviceInfo``) and a listener serves."""

    name: DnsLabel
    namespace: DnsLabel = KCP_NAMESPACE
    port: int = Field(ge=1, le=65535)

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.name, self.namespace, self.port)


KLM_SERVICE = Service(name="klm-controller-manager-events", namespace=KCP_NAMESPACE, port=8082)


class DefaultWatcher(Model):
    """``{default: true}``: KLM's own Watcher, ``kcp-system/klm-watcher``."""

    default: Literal[True]
    name: ClassVar[str] = KLM_WATCHER
    namespace: ClassVar[str] = KCP_NAMESPACE
    manager: ClassVar[str] = KLM_COMPONENT
    manager_name: ClassVar[str] = KLM_COMPONENT
    service: ClassVar[Service] = KLM_SERVICE

    def to_dict(self) -> dict[str, Any]:
        return klm_watcher_dict()


class WatcherDef(Model):
    """A full Watcher; rendered with :func:`watcher.render.watcher_cr.watcher_dict`.

    ``manager`` is ``spec.manager``; left out, the manager is the
    ``operator.kyma-project.io/managed-by`` label of ``labels``, as upstream reads it."""

    name: DnsLabel
    namespace: DnsLabel = KCP_NAMESPACE
    manager: DnsLabel | None = None
    labels: Labels = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    resource: Resource = Field(json_schema_extra=RESOURCE_SCHEMA_EXTRA)
    field: Literal["spec", "status"] = "spec"
    labels_to_watch: Labels = Field(default_factory=dict)
    service: Service

    @property
    def manager_name(self) -> str:
        """The manager events go to: ``manager``, else the managed-by label."""
        return self.manager or self.labels.get(MANAGED_BY_LABEL, "")

    @model_validator(mode="after")
    def _renderable(self) -> WatcherDef:
        try:
            parse_watcher(self.to_dict())
        except InvalidWatcher as exc:
            raise ValueError(str(exc)) from None
        return self

    def to_dict(self) -> dict[str, Any]:
        """The Watcher CR to apply in the KCP."""
        r = self.resource
        out = watcher_dict(
            self.name,
            namespace=self.namespace,
            manager=self.manager or "",
            resource=(r.group, r.version, r.resource),
            field=self.field,
            service=self.service.key,
            labels_to_watch=self.labels_to_watch,
            labels=self.labels,
        )
        if self.annotations:
            out["metadata"]["annotations"] = dict(self.annotations)
        return out


def _watcher_tag(value: Any) -> str:
    if isinstance(value, dict) and "default" in value:
        return "default"
    if isinstance(value, DefaultWatcher):
        return "default"
    return "watcher"


AnyWatcher = Annotated[
    Annotated[DefaultWatcher, Tag("default")] | Annotated[WatcherDef, Tag("watcher")],
    Discriminator(_watcher_tag),
]


class Listener(Model):
    """Another manager's listener behind the gateway, registered as ``service``.

    ``implementation: upstream`` runs upstream's Go listener (the
    ``github.com/kyma-project/runtime-watcher/listener`` package, plain HTTP behind the
    gateway, no SAN pinning) instead of ours; its events count like ours."""

    component: DnsLabel
    service: Service
    implementation: Literal["ours", "upstream"] = "ours"
