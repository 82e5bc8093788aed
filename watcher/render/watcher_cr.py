"""The Watcher CR (``operator.kyma-project.io/v1beta2``), validated before anything is rendered.

Pure. ``parse_watcher`` turns a CR dict into a frozen ``Watcher`` or raises
``InvalidWatcher`` listing every problem with its field path, so a broken CR never yields
a half-rendered webhook or route. Values that end up in a webhook configuration, an URL
path or an Envoy route (names, labels, the manager) are checked against the Kubernetes
rules that would otherwise only fail when the rendered object is applied.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

from watcher.domain import MANAGED_BY_LABEL, WATCHED_BY_LABEL
from watcher.errors import InvalidWatcher
from watcher.paths import validate_manager_name

API_VERSION = "operator.kyma-project.io/v1beta2"
KIND = "Watcher"
GATEWAY_SELECTOR_LABEL = "operator.kyma-project.io/watcher-gateway"
DEFAULT_GATEWAY_SELECTOR: dict[str, Any] = {"matchLabels": {GATEWAY_SELECTOR_LABEL: "default"}}

# ``\Z``, not ``$``: ``$`` also matches before a trailing newline ("name\n").
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")
_LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]\Z")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?\Z")
_VERSION = re.compile(r"^(\*|[a-z0-9]([-a-z0-9]*[a-z0-9])?)\Z")
# A Kubernetes name may be up to 253 characters, a webhook name too; the webhook name
# adds the namespace and a suffix, so a long Watcher name would make it unrenderable.
_WEBHOOK_SUFFIX = ".operator.kyma-project.io"


def _dns_label(value: str) -> str:
    if len(value) > 63 or not _DNS_LABEL.match(value):
        raise ValueError(f"{value!r} is not a DNS label (RFC 1123, at most 63 characters)")
    return value


def _dns_subdomain(value: str) -> str:
    if len(value) > 253 or not _DNS_SUBDOMAIN.match(value):
        raise ValueError(f"{value!r} is not a DNS subdomain (RFC 1123, at most 253 characters)")
    return value


def _api_group(value: str) -> str:
    return value if value in ("", "*") else _dns_subdomain(value)


def _version(value: str) -> str:
    if len(value) > 63 or not _VERSION.match(value):
        raise ValueError(f"{value!r} is not an API version (like 'v1beta2') or '*'")
    return value


def _resource(value: str) -> str:
    if value == "*":
        return value
    if "/" in value:
        raise ValueError(
            f"{value!r} must be a plural resource name without a subresource; "
            "use field: status to watch the status subresource"
        )
    return _dns_label(value)


def label_key_problem(key: str) -> str | None:
    """Why ``key`` is not a valid label key, or ``None`` (Kubernetes qualified name rules)."""
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        return f"label key {key!r}: prefix {prefix!r} is not a DNS subdomain"
    if not name or len(name) > 63 or not _LABEL_NAME.match(name):
        return (
            f"label key {key!r}: name part must be 1-63 alphanumerics, '-', '_' or '.', "
            "starting and ending with an alphanumeric"
        )
    return None


def label_value_problem(value: str) -> str | None:
    """Why ``value`` is not a valid label value, or ``None``."""
    if len(value) > 63 or not _LABEL_VALUE.match(value):
        return (
            f"label value {value!r} must be at most 63 alphanumerics, '-', '_' or '.', "
            "starting and ending with an alphanumeric"
        )
    return None


def _labels(value: dict[str, str]) -> dict[str, str]:
    problems = [p for k, v in value.items() for p in (label_key_problem(k), label_value_problem(v))]
    found = [p for p in problems if p]
    if found:
        raise ValueError("; ".join(found))
    return value


DnsLabel = Annotated[str, AfterValidator(_dns_label)]
DnsSubdomain = Annotated[str, AfterValidator(_dns_subdomain)]
Labels = Annotated[dict[str, str], AfterValidator(_labels)]


class _Strict(BaseModel):
    """Spec objects: frozen, strict types, unknown fields refused."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, populate_by_name=True)


class ResourceToWatch(_Strict):
    group: Annotated[str, AfterValidator(_api_group)]
    version: Annotated[str, AfterValidator(_version)]
    resource: Annotated[str, AfterValidator(_resource)]


class ServiceInfo(_Strict):
    name: DnsLabel
    namespace: DnsLabel
    port: int = Field(ge=1, le=65535)

    @property
    def host(self) -> str:
        """The in-cluster DNS name of the service."""
        return f"{self.name}.{self.namespace}.svc.cluster.local"


class LabelSelectorRequirement(_Strict):
    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: tuple[str, ...] = Field(default=(), strict=False)

    @model_validator(mode="after")
    def _consistent(self) -> LabelSelectorRequirement:
        problems = [label_key_problem(self.key)]
        if self.operator in ("In", "NotIn") and not self.values:
            problems.append(f"operator {self.operator} needs at least one value")
        if self.operator in ("Exists", "DoesNotExist") and self.values:
            problems.append(f"operator {self.operator} takes no values")
        problems.extend(label_value_problem(v) for v in self.values)
        found = [p for p in problems if p]
        if found:
            raise ValueError("; ".join(found))
        return self


class LabelSelector(_Strict):
    """A ``metav1.LabelSelector``; the empty selector matches everything."""

    match_labels: Labels = Field(default_factory=dict, alias="matchLabels")
    match_expressions: tuple[LabelSelectorRequirement, ...] = Field(
        default=(), alias="matchExpressions", strict=False
    )

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether an object with ``labels`` is selected (apimachinery semantics)."""
        if any(labels.get(k) != v for k, v in self.match_labels.items()):
            return False
        for req in self.match_expressions:
            present = req.key in labels
            if req.operator == "In" and not (present and labels[req.key] in req.values):
                return False
            if req.operator == "NotIn" and present and labels[req.key] in req.values:
                return False
            if req.operator == "Exists" and not present:
                return False
            if req.operator == "DoesNotExist" and present:
                return False
        return True


class GatewayConfig(_Strict):
    selector: LabelSelector


class WatcherSpec(_Strict):
    resource_to_watch: ResourceToWatch = Field(alias="resourceToWatch")
    labels_to_watch: Labels = Field(default_factory=dict, alias="labelsToWatch")
    field: Literal["spec", "status"]
    manager: str = ""
    service_info: ServiceInfo = Field(alias="serviceInfo")
    gateway: GatewayConfig


class WatcherMeta(BaseModel):
    """The metadata the renderers use; the API server's other fields are ignored."""

    model_config = ConfigDict(frozen=True, extra="ignore", strict=True)

    name: DnsSubdomain
    namespace: DnsLabel
    labels: Labels = Field(default_factory=dict)
    uid: str = ""


class Watcher(BaseModel):
    """A validated Watcher CR. Build it with ``parse_watcher``."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, populate_by_name=True)

    api_version: Literal["operator.kyma-project.io/v1beta2"] = Field(alias="apiVersion")
    kind: Literal["Watcher"]
    metadata: WatcherMeta
    spec: WatcherSpec
    status: dict[str, Any] | None = None

    @property
    def name(self) -> str:
        return self.metadata.name

    @property
    def namespace(self) -> str:
        return self.metadata.namespace

    @property
    def manager(self) -> str:
        """``spec.manager``, or the ``operator.kyma-project.io/managed-by`` label."""
        return self.spec.manager or self.metadata.labels.get(MANAGED_BY_LABEL, "")

    @property
    def webhook_name(self) -> str:
        """``<namespace>.<name>.operator.kyma-project.io``: its webhook in every SKR."""
        return f"{self.namespace}.{self.name}{_WEBHOOK_SUFFIX}"

    @property
    def route_name(self) -> str:
        """``<namespace>/<name>``: its route in the KCP gateway."""
        return f"{self.namespace}/{self.name}"


def _loc(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", part):
            out += f".{part}" if out else part
        else:
            out += f"[{part!r}]"
    return out or "(root)"


def _raw(obj: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(key)
    return obj


def _manager_problem(obj: Any) -> str | None:
    """The manager check, done on the raw dict so it is reported with every other problem."""
    spec_manager = _raw(obj, "spec", "manager")
    if spec_manager is not None and not isinstance(spec_manager, str):
        return None  # the type error is reported by the model
    labels = _raw(obj, "metadata", "labels")
    label = labels.get(MANAGED_BY_LABEL) if isinstance(labels, Mapping) else None
    if spec_manager:
        where, manager = "spec.manager", spec_manager
    elif isinstance(label, str) and label:
        where, manager = f"metadata.labels[{MANAGED_BY_LABEL!r}] (spec.manager is empty)", label
    else:
        return f"spec.manager: empty and no label {MANAGED_BY_LABEL} gives the manager"
    try:
        validate_manager_name(manager)
    except ValueError as exc:
        return f"{where}: manager {exc}"
    return None


def _name_problem(obj: Any) -> str | None:
    name, namespace = _raw(obj, "metadata", "name"), _raw(obj, "metadata", "namespace")
    if isinstance(name, str) and isinstance(namespace, str):
        length = len(namespace) + 1 + len(name) + len(_WEBHOOK_SUFFIX)
        if length > 253:
            return (
                f"metadata.name: webhook name <namespace>.<name>{_WEBHOOK_SUFFIX} would be "
                f"{length} characters, more than 253"
            )
    return None


def parse_watcher(obj: Any) -> Watcher:
    """Validate a Watcher CR dict; ``InvalidWatcher`` lists every problem with its path."""
    problems: list[str] = []
    watcher: Watcher | None = None
    if not isinstance(obj, Mapping):
        raise InvalidWatcher(f"Watcher must be an object, got {type(obj).__name__}")
    try:
        watcher = Watcher.model_validate(dict(obj))
    except ValidationError as exc:
        for error in exc.errors(include_url=False):
            message = error["msg"].removeprefix("Value error, ")
            problems.append(f"{_loc(error['loc'])}: {message}")
    problems.extend(p for p in (_manager_problem(obj), _name_problem(obj)) if p)
    if problems or watcher is None:
        meta = obj.get("metadata")
        ident = "Watcher"
        if isinstance(meta, Mapping):
            ident = f"Watcher {meta.get('namespace', '?')}/{meta.get('name', '?')}"
        count = len(problems)
        raise InvalidWatcher(
            f"{ident} cannot be rendered ({count} problem{'s' if count != 1 else ''}): "
            + "; ".join(problems)
        )
    return watcher


def parse_watchers(objs: list[Any]) -> list[Watcher]:
    """Parse every Watcher; one ``InvalidWatcher`` names all broken ones.

    Duplicate ``namespace/name`` pairs are refused: they would give duplicate webhook names.
    """
    problems: list[str] = []
    watchers: list[Watcher] = []
    for index, obj in enumerate(objs):
        try:
            watchers.append(parse_watcher(obj))
        except InvalidWatcher as exc:
            problems.append(f"[{index}] {exc}")
    seen: set[str] = set()
    for watcher in watchers:
        if watcher.route_name in seen:
            problems.append(f"Watcher {watcher.route_name} appears more than once")
        seen.add(watcher.route_name)
    if problems:
        raise InvalidWatcher("; ".join(problems))
    return watchers


def watcher_dict(
    name: str,
    *,
    namespace: str = "kcp-system",
    manager: str,
    resource: tuple[str, str, str],
    field: Literal["spec", "status"] = "spec",
    service: tuple[str, str, int],
    labels_to_watch: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    gateway_selector: Mapping[str, Any] | None = None,
    uid: str | None = None,
) -> dict[str, Any]:
    """A Watcher CR dict; ``resource`` is (group, version, plural), ``service`` (name, ns, port).

    The gateway selector defaults to ``matchLabels: {operator.kyma-project.io/watcher-gateway:
    default}``, as KLM's Watchers use.
    """
    group, version, plural = resource
    svc_name, svc_namespace, port = service
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels:
        metadata["labels"] = dict(labels)
    if uid is not None:
        metadata["uid"] = uid
    spec: dict[str, Any] = {
        "resourceToWatch": {"group": group, "version": version, "resource": plural},
        "labelsToWatch": dict(labels_to_watch or {}),
        "field": field,
        "manager": manager,
        "serviceInfo": {"name": svc_name, "namespace": svc_namespace, "port": port},
        "gateway": {"selector": _copy_selector(gateway_selector or DEFAULT_GATEWAY_SELECTOR)},
    }
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": metadata, "spec": spec}


def _copy_selector(selector: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if "matchLabels" in selector:
        out["matchLabels"] = dict(selector["matchLabels"])
    if "matchExpressions" in selector:
        out["matchExpressions"] = [dict(e) for e in selector["matchExpressions"]]
    return out


def klm_watcher_dict(*, uid: str | None = None) -> dict[str, Any]:
    """KLM's default Watcher ``kcp-system/klm-watcher`` (Kyma spec changes → lifecycle-manager)."""
    return watcher_dict(
        "klm-watcher",
        namespace="kcp-system",
        manager="lifecycle-manager",
        labels={MANAGED_BY_LABEL: "lifecycle-manager"},
        labels_to_watch={WATCHED_BY_LABEL: "kyma"},
        resource=("operator.kyma-project.io", "*", "kymas"),
        field="spec",
        service=("klm-controller-manager-events", "kcp-system", 8082),
        uid=uid,
    )
