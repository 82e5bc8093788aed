"""The scenario: clusters, watchers, listeners, Kymas, settings, then ordered steps.

Pure. A :class:`Scenario` is valid as a whole: besides every field's own checks, the names
that operations and expectations use refer to things the scenario declares
(:mod:`harness.scenario.references`).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, PrivateAttr, model_validator

from harness.scenario.clusters import Backend, Clusters
from harness.scenario.kymas import Kyma, default_kymas
from harness.scenario.modules import Module
from harness.scenario.references import ReferenceProblems, check_references
from harness.scenario.requirements import Requirements
from harness.scenario.settings import Settings
from harness.scenario.steps import Step
from harness.scenario.values import DnsLabel, Model, PositiveDuration
from harness.scenario.watchers import AnyWatcher, DefaultWatcher, Listener

DEFAULT_SCENARIO_TIMEOUT = 300.0


class Scenario(Model):
    name: DnsLabel
    description: str = ""
    backend: Backend = Backend.LOCAL
    timeout: PositiveDuration = DEFAULT_SCENARIO_TIMEOUT
    tags: tuple[DnsLabel, ...] = ()
    clusters: Clusters
    watchers: tuple[AnyWatcher, ...] = (DefaultWatcher(default=True),)
    listeners: tuple[Listener, ...] = ()
    kymas: tuple[Kyma, ...] | None = None
    modules: tuple[Module, ...] = ()
    """The KCP's module catalog (:mod:`harness.scenario.modules`)."""
    settings: Settings = Field(default_factory=Settings)
    matrix: dict[str, list[str | int | float | bool]] | None = None
    """Each combination runs as its own instance (``<name>-<key>-<value>``), with its
    values as ``${{ matrix.<key> }}`` (:mod:`harness.scenario.bindings`)."""
    bindings: dict[str, Any] = Field(default_factory=dict)
    """``${{ name }}`` values for every step (already substituted when loaded)."""
    requires: Requirements = Field(default_factory=Requirements)
    """Our webhook's features the whole scenario needs (:mod:`harness.scenario.requirements`);
    against another webhook (``--webhook-command``) it is skipped with the reason."""
    steps: tuple[Step, ...] = Field(min_length=1)

    _source: str | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _references(self) -> Scenario:
        problems = check_references(self)
        if problems:
            raise ReferenceProblems(problems)
        return self

    @property
    def source(self) -> str | None:
        """The file it was loaded from (``None`` if built in code)."""
        return self._source

    @property
    def effective_kymas(self) -> tuple[Kyma, ...]:
        """``kymas`` if given, else the defaults (one KCP Kyma + one SKR Kyma per SKR)."""
        return self.kymas if self.kymas is not None else default_kymas(self.clusters.skrs)
