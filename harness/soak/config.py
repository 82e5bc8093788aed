"""What one soak run is: its knobs, the churn it writes, and the two Watchers it routes
(KLM's on Kymas, ``soak-configmaps`` on ConfigMaps labelled ``SOAK_LABEL``), apart from
the code that runs it so the command line and the report can read a run's knobs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.churn.plan import ChurnMix, ChurnSpec
from harness.churn.truth import Rule
from harness.environment import KCP_NAMESPACE, SkrSpec
from harness.environment.spec import SKR_KYMA_LABELS
from harness.soak.model import Thresholds, Windows
from watcher.domain import WATCHED_BY_LABEL
from watcher.render.watcher_cr import klm_watcher_dict, parse_watcher, watcher_dict

SOAK_LABEL = "harness.kyma-project.io/soak"
CONFIG_MANAGER = "config-manager"
CONFIG_SERVICE = ("config-manager-events", KCP_NAMESPACE, 8084)


@dataclass(frozen=True)
class SoakConfig:
    """Knobs of one run; ``rate`` is writes per second over all SKRs together."""

    duration: float = 600.0
    rate: float = 50.0
    skrs: int = 3
    objects: int = 100
    seed: int = 6
    interval: float = 2.0
    min_warmup: float = 60.0
    settle: float = 30.0
    health_interval: float | None = 10.0
    """Watcher health's heartbeat interval during the soak (None: off); a runtime that
    leaves Healthy under churn is a false alarm and fails the run."""
    health_timeout: float = 2.0
    log_dir: Path = Path("reports/soak/logs")
    thresholds: Thresholds = field(default_factory=Thresholds)

    @property
    def windows(self) -> Windows:
        return Windows.of(self.duration, min_warmup=self.min_warmup)

    def checked_windows(self) -> Windows:
        """:attr:`windows`, or ValueError before anything starts when a window would hold
        fewer than two samples at the sampling ``interval``."""
        windows = self.windows
        if windows.first_end - windows.warmup < 2 * self.interval:
            shortest = 20 * self.interval  # windows are a tenth of the run
            raise ValueError(
                f"a {self.duration:g} s run has {windows.first_end - windows.warmup:g} s "
                f"windows, fewer than two samples at the {self.interval:g} s sampling period; "
                f"run at least {shortest:g} s or sample more often (--interval)"
            )
        return windows

    @property
    def skr_specs(self) -> tuple[SkrSpec, ...]:
        names = [f"skr-{chr(ord('a') + i)}" for i in range(self.skrs)]
        return tuple(SkrSpec(n, f"runtime-{n}", f"{n}.kyma.example.com") for n in names)

    def churn_spec(self) -> ChurnSpec:
        watched = {WATCHED_BY_LABEL: SKR_KYMA_LABELS[WATCHED_BY_LABEL], SOAK_LABEL: "on"}
        return ChurnSpec(
            clusters=tuple(s.name for s in self.skr_specs),
            kinds=("kymas", "configmaps"),
            mix=ChurnMix(create=1, spec_update=3, status_update=1, label_flip=1, delete=1),
            objects=self.objects,
            rate=self.rate / self.skrs,
            duration=self.duration,
            seed=self.seed,
            labels=watched,
            flip_labels=watched,
            name_prefix="soak",
        )


def soak_watcher() -> dict[str, Any]:
    return watcher_dict(
        "soak-configmaps",
        namespace=KCP_NAMESPACE,
        manager=CONFIG_MANAGER,
        resource=("", "v1", "configmaps"),
        field="spec",
        labels_to_watch={SOAK_LABEL: "on"},
        service=CONFIG_SERVICE,
    )


def rules() -> tuple[Rule, ...]:
    return tuple(Rule.from_watcher(parse_watcher(w)) for w in (klm_watcher_dict(), soak_watcher()))
