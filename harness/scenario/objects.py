"""Which objects a step means: a type (``resource`` or ``apiVersion`` + ``kind``), a
``namespace``, a ``name`` and/or a label ``selector`` — shared by ``assert``/``error``,
``collect`` and the timeline's ``object`` occurrences, which each add their cluster and
what they do with the objects. Pure."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from harness.matching.syntax import check_expressions
from harness.scenario.values import RESOURCE_SCHEMA_EXTRA, Labels, Model, Resource


class ObjectType(Model):
    """The fields that pick objects on one cluster (the cluster is the subclass's)."""

    resource: Resource | None = Field(default=None, json_schema_extra=RESOURCE_SCHEMA_EXTRA)
    api_version: str | None = None
    kind: str | None = None
    namespace: str = ""
    name: str | None = None
    selector: Labels | None = None

    @property
    def typed(self) -> bool:
        """Given as ``apiVersion`` + ``kind`` rather than ``resource``."""
        return self.api_version is not None or self.kind is not None

    def type_problem(self, *, required: bool) -> str | None:
        """Why the object type is given wrongly (``required``: it must be given)."""
        if self.resource is not None and self.typed:
            return "give resource or apiVersion + kind, not both"
        if self.typed and not (self.api_version and self.kind):
            return "apiVersion and kind go together"
        if required and self.resource is None and not self.typed:
            return "select objects by resource, or by apiVersion and kind"
        return None

    def describe_objects(self) -> str:
        """``kymas kyma-system/default``, ``ConfigMap *{app=demo}``."""
        what = self.kind or (self.resource.resource if self.resource else "")
        where = f"{self.namespace}/" if self.namespace else ""
        which = self.name or ""
        if self.selector:
            which += "{" + ",".join(f"{k}={v}" for k, v in self.selector.items()) + "}"
        return f"{what} {where}{which or '*'}"


def match_problem(match: Any) -> str | None:
    """The first invalid expression or special map of a ``match`` tree, located as
    ``match.a.b[0]: ...``, or ``None``."""
    problems = check_expressions(match) if match is not None else []
    if not problems:
        return None
    path, problem = problems[0]
    where = "match" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)
    return f"{where}: {problem}"
