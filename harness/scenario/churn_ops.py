"""The ``churn`` operation: seeded random writes on SKRs, recorded as ground truth
(:mod:`harness.churn` plans and runs them)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from harness.scenario.values import DnsLabel, Labels, Model, PositiveDuration


class ChurnMix(Model):
    """Relative weights of the mutation kinds (need not add up to anything)."""

    create: float = Field(default=1.0, ge=0)
    spec_update: float = Field(default=3.0, ge=0)
    status_update: float = Field(default=1.0, ge=0)
    label_flip: float = Field(default=1.0, ge=0)
    delete: float = Field(default=1.0, ge=0)

    @model_validator(mode="after")
    def _some_weight(self) -> ChurnMix:
        if not any((self.create, self.spec_update, self.status_update, self.label_flip)):
            raise ValueError("mix needs a positive weight besides delete")
        return self


class Churn(Model):
    """Seeded random writes on SKRs; every write is recorded as ground truth.

    ``objects`` is the pool size per cluster and kind, ``rate`` writes per second per
    cluster, ``labels`` are put on every created object. ``background: true`` lets the
    step go on at once; later ``truth`` and ``latency`` expectations wait for it to end.
    """

    clusters: tuple[DnsLabel, ...] = Field(min_length=1)
    kinds: tuple[Literal["kymas", "configmaps", "secrets"], ...] = ("configmaps",)
    mix: ChurnMix = Field(default_factory=ChurnMix)
    objects: int = Field(default=10, ge=1, le=10_000)
    rate: float = Field(default=10.0, gt=0, le=10_000)
    duration: PositiveDuration = 10.0
    seed: int = 0
    labels: Labels = Field(default_factory=dict)
    background: bool = False
