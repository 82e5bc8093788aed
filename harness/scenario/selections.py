"""Operations that pick objects on a cluster: ``assert`` and ``error`` (a
:class:`Selection` polled for a match) and ``collect`` (objects and events into the report),
and the ``capture`` of values they and ``script`` keep as bindings."""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from harness.matching.syntax import expression_problem
from harness.scenario.expectations import Count
from harness.scenario.objects import ObjectType, match_problem
from harness.scenario.values import PositiveDuration

SELECTION_CLUSTER_PATTERN = r"^(\*|[a-z0-9]([-a-z0-9]*[a-z0-9])?)$"
EVERY_SKR = "*"
"""``cluster: "*"`` selects on every SKR: an ``assert`` must hold on each."""


class _Selecting(ObjectType):
    """The fields that pick objects (see :class:`Selection`), shared with ``collect``."""

    cluster: str = Field(pattern=SELECTION_CLUSTER_PATTERN)


class Selection(_Selecting):
    """Which objects: on ``cluster`` (a cluster name, or ``"*"`` for every SKR), of
    ``resource`` (a shorthand or ``{group, version, resource}``) or ``apiVersion`` +
    ``kind`` (looked up with the API server's discovery), in ``namespace`` (empty: every
    namespace, or a cluster-scoped kind), by ``name`` and/or label ``selector``."""

    @model_validator(mode="after")
    def _one_type(self) -> Selection:
        problem = self.type_problem(required=True)
        if problem is not None:
            raise ValueError(problem)
        return self

    def describe(self) -> str:
        cluster = "every SKR" if self.cluster == EVERY_SKR else self.cluster
        return f"{self.describe_objects()} on {cluster}"


def capture_problem(capture: dict[str, str]) -> str | None:
    """Why a ``capture`` mapping (name → JMESPath) is invalid, or ``None``."""
    for name, expression in capture.items():
        if not expression.strip():
            return f"capture.{name}: the expression is empty"
        problem = expression_problem(f"({expression})")
        if problem is not None:
            return f"capture.{name}: {problem}"
    return None


Capture = dict[str, str]
"""``capture: {name: expression}``: each name gets the JMESPath ``expression``'s value
(over the matching object, or a command's JSON output) for the rest of the run, as
``${{ name }}``."""


class Assert(Selection):
    """``assert``: poll until a selected object matches ``match`` (a partial object tree:
    maps as subsets, scalars equal, lists item by item; ``$anyOrder`` / ``$contains`` /
    ``$oneOf`` forms; ``(jmespath)`` keys compute a value) on the cluster — on each SKR
    for ``cluster: "*"`` — or ``within`` ends. ``count`` asks how many selected objects
    match (on each cluster), instead of at least one. ``capture`` keeps values of the
    (first) matching object as bindings for later operations. As ``error``: holds when
    no selected object matches (also when none exists). ``match: {}`` only asks that one
    exists."""

    match: dict[str, Any] = Field(default_factory=dict)
    within: PositiveDuration = 10.0
    count: Count | None = None
    capture: Capture = Field(default_factory=dict)

    @model_validator(mode="after")
    def _expressions(self) -> Assert:
        if (problem := match_problem(self.match)) is not None:
            raise ValueError(problem)
        if (capture := capture_problem(self.capture)) is not None:
            raise ValueError(capture)
        if self.capture and self.cluster == EVERY_SKR:
            raise ValueError(
                'capture needs one cluster, not "*": each SKR would give its own value'
            )
        if self.capture and self.bounds[1] == 0:
            raise ValueError("capture needs a matching object; this count allows none")
        return self

    @property
    def bounds(self) -> tuple[int, int | None]:
        """(at least, at most or ``None``) matching objects per cluster."""
        return Count.bounds_of(self.count)


class Collect(_Selecting):
    """Put material into the report (usable in ``catch``/``finally``): the selected
    objects' YAML (``resource`` or ``apiVersion`` + ``kind``, ``namespace``, ``name``,
    ``selector``) and/or the cluster's Kubernetes ``events`` (of ``namespace``, or all)."""

    events: bool = False

    @model_validator(mode="after")
    def _something(self) -> Collect:
        problem = self.type_problem(required=False)
        if problem is not None:
            raise ValueError(problem)
        if self.resource is None and not self.typed and not self.events:
            raise ValueError(
                "collect needs objects (resource, or apiVersion + kind), events: true, or both"
            )
        return self

    def selection(self) -> Selection | None:
        if self.resource is None and self.kind is None:
            return None
        return Selection(**{name: getattr(self, name) for name in _Selecting.model_fields})
