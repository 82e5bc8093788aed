"""Value types shared by the scenario model: durations, names, labels, API resources.

Pure. Every validator raises ``ValueError`` with a message that can be shown as it is;
the loader puts the file, line and column in front of it.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, Self

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, WithJsonSchema
from pydantic.alias_generators import to_camel

from watcher.render.watcher_cr import label_key_problem, label_value_problem


class Model(BaseModel):
    """Base of every scenario type: frozen, unknown keys refused, camelCase keys in YAML."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, populate_by_name=True, alias_generator=to_camel
    )

    def given_any(self, what: str, *fields: str) -> Self:
        """``self`` if one of ``fields`` is given (not null, not empty), else a ValueError."""
        if all(getattr(self, name) in (None, ()) for name in fields):
            raise ValueError(f"{what} needs at least one of {', '.join(fields)}")
        return self


# Durations ---------------------------------------------------------------------------------

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
DURATION_PATTERN = r"^(\d+(\.\d+)?(ms|s|m|h))+$"
DURATION_HINT = "write a number of seconds or a number with a unit: 500ms, 2s, 1.5m, 1h, 1m30s"


def parse_duration(value: Any) -> float:
    """``"500ms"``, ``"2s"``, ``"1m30s"``, ``"1h"`` or a number of seconds → seconds."""
    if isinstance(value, bool):
        raise ValueError(f"invalid duration {value!r}; {DURATION_HINT}")
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        text = value.strip()
        if not re.fullmatch(DURATION_PATTERN, text):
            raise ValueError(f"invalid duration {value!r}; {DURATION_HINT}")
        seconds = sum(float(n) * _UNITS[u] for n, u in _DURATION_PART.findall(text))
    else:
        raise ValueError(f"invalid duration {value!r}; {DURATION_HINT}")
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(f"invalid duration {value!r}: must be a finite number >= 0")
    return seconds


def _positive(seconds: float) -> float:
    if seconds <= 0:
        raise ValueError("duration must be greater than 0")
    return seconds


def format_duration(seconds: float) -> str:
    """The shortest exact spelling: ``0.5`` → ``"500ms"``, ``90`` → ``"90s"``."""
    if seconds < 1 and (seconds * 1000).is_integer():
        return f"{int(seconds * 1000)}ms"
    if seconds.is_integer():
        return f"{int(seconds)}s"
    return f"{seconds!r}s"


_DURATION_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {"type": "number", "minimum": 0},
        {"type": "string", "pattern": DURATION_PATTERN},
    ],
    "description": "seconds, or a string like 500ms, 2s, 1m, 1h, 1m30s",
}

Duration = Annotated[float, BeforeValidator(parse_duration), WithJsonSchema(_DURATION_SCHEMA)]
PositiveDuration = Annotated[
    float,
    BeforeValidator(parse_duration),
    AfterValidator(_positive),
    WithJsonSchema({**_DURATION_SCHEMA, "not": {"const": 0}}),
]


# Names and labels --------------------------------------------------------------------------

DNS_LABEL_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"


def dns_label(value: str) -> str:
    if len(value) > 63 or not re.fullmatch(DNS_LABEL_PATTERN, value):
        raise ValueError(
            f"{value!r} is not a DNS label (lower-case letters, digits and '-', starting and "
            "ending with a letter or digit, at most 63 characters)"
        )
    return value


def _labels(value: dict[str, str]) -> dict[str, str]:
    problems = [p for k, v in value.items() for p in (label_key_problem(k), label_value_problem(v))]
    found = [p for p in problems if p]
    if found:
        raise ValueError("; ".join(found))
    return value


def _non_empty(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    return value


DnsLabel = Annotated[
    str,
    AfterValidator(dns_label),
    WithJsonSchema({"type": "string", "pattern": DNS_LABEL_PATTERN, "maxLength": 63}),
]
Labels = Annotated[dict[str, str], AfterValidator(_labels)]
Text = Annotated[
    str, AfterValidator(_non_empty), WithJsonSchema({"type": "string", "minLength": 1})
]


# API resources -----------------------------------------------------------------------------


class ResourceRef(Model):
    """An API resource: ``{group, version, resource}`` (``resource`` is the plural)."""

    group: str = ""
    version: Text
    resource: Text


# The kinds a scenario may name by their plural instead of a full ``ResourceRef``.
KINDS: dict[str, tuple[str, str, str]] = {
    "kymas": ("operator.kyma-project.io", "v1beta2", "kymas"),
    "watchers": ("operator.kyma-project.io", "v1beta2", "watchers"),
    "manifests": ("operator.kyma-project.io", "v1beta2", "manifests"),
    "moduletemplates": ("operator.kyma-project.io", "v1beta2", "moduletemplates"),
    "modulereleasemetas": ("operator.kyma-project.io", "v1beta2", "modulereleasemetas"),
    "configmaps": ("", "v1", "configmaps"),
    "secrets": ("", "v1", "secrets"),
    "namespaces": ("", "v1", "namespaces"),
}


def _expand_kind(value: Any) -> Any:
    if isinstance(value, str):
        if value not in KINDS:
            raise ValueError(
                f"unknown kind {value!r}; use one of {', '.join(KINDS)} "
                "or {group, version, resource}"
            )
        group, version, resource = KINDS[value]
        return {"group": group, "version": version, "resource": resource}
    return value


def _resource_schema(schema: dict[str, Any]) -> None:
    ref = dict(schema)
    schema.clear()
    schema["anyOf"] = [ref, {"type": "string", "enum": list(KINDS)}]


# ``resource: kymas`` or ``resource: {group: "", version: v1, resource: configmaps}``.
Resource = Annotated[ResourceRef, BeforeValidator(_expand_kind)]
RESOURCE_SCHEMA_EXTRA = _resource_schema
