"""What ``watcher-harness up`` brings up: the demo environment, or a scenario file's.

Pure apart from reading the scenario file. ``up`` without ``--scenario``: a KCP, N SKRs,
KLM's Watcher and a small demo module catalog (:data:`DEMO_MODULES`), so a module enabled
in an SKR Kyma's ``spec.modules`` gets its Manifest in the KCP. ``up --scenario FILE``:
what the file declares — clusters, ``modules``, Watchers, listeners, Kymas and settings —
through the runner's own plan on the local backend (:func:`harness.runner.plan
.plan_scenario`; its Kymas are applied with :func:`harness.runner.scenario.setup_kymas`
once the environment is up), but none of its steps. A file with a ``matrix`` gives one
instance: the one ``--matrix key=value`` selects, else the first (:attr:`Plan.notes`
says which).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from harness.clusters.selection import (
    BackendChoice,
    BackendOverride,
    BackendSelectionError,
    choose_backend,
)
from harness.environment.spec import EnvironmentSpec, SkrSpec
from harness.runner.plan import plan_scenario
from harness.runner.spec import module_catalog
from harness.scenario import Scenario
from harness.scenario.loader import load_scenario_instances
from harness.scenario.matrix import Instance, instances
from harness.scenario.modules import Module
from watcher.health.state import Policy

DEMO_MODULES = (
    Module(name="serverless", channels={"regular": "1.0.0", "fast": "1.1.0"}),
    Module(name="keda", channels={"regular": "2.16.0", "fast": "2.16.0"}),
)
"""The catalog of ``up`` without ``--scenario``: enable ``serverless`` or ``keda`` in an
SKR Kyma and the KCP gets a Manifest for it."""


class PlanError(ValueError):
    """Arguments ``up`` cannot bring up (one line; exit 2)."""


@dataclass(frozen=True)
class Plan:
    """The environment to start; ``scenario``: whose Kymas to apply once it is up."""

    spec: EnvironmentSpec
    modules: tuple[Module, ...]
    scenario: Scenario | None = None
    notes: tuple[str, ...] = ()
    """Lines to print before starting (which matrix instance was taken)."""


LOCAL = BackendOverride(name="local")
"""``up`` runs local clusters (``WATCHER_HARNESS_WEBHOOK_COMMAND`` still applies)."""


def _local_backend() -> BackendChoice:
    try:
        return choose_backend("local", override=LOCAL)
    except BackendSelectionError as exc:
        raise PlanError(str(exc)) from None


def demo_plan(count: int, health_interval: float) -> Plan:
    """``count`` SKRs (``skr-a``, ...), KLM's Watcher, :data:`DEMO_MODULES`; watcher
    health every ``health_interval`` seconds (0: off)."""
    letters = "abcdefghij"
    health = (
        Policy(interval=health_interval, timeout=min(5.0, health_interval / 2))
        if health_interval > 0
        else None
    )
    spec = EnvironmentSpec(
        skrs=tuple(
            SkrSpec(f"skr-{c}", f"runtime-{c}", f"skr-{c}.kyma.example.com")
            for c in letters[:count]
        ),
        health=health,
        catalog=module_catalog(DEMO_MODULES),
        backend=_local_backend(),
    )
    return Plan(spec, DEMO_MODULES)


def _text(value: object) -> str:
    """A matrix value as ``--matrix`` spells it (``true``, ``3``, ``fast``)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def parse_matrix_args(texts: Sequence[str]) -> dict[str, str]:
    """``["skrs=3", "mode=sync"]`` → ``{"skrs": "3", "mode": "sync"}``."""
    out: dict[str, str] = {}
    for text in texts:
        key, sep, value = text.partition("=")
        if not sep or not key.strip():
            raise PlanError(f"--matrix {text!r}: write key=value (e.g. skrs=3)")
        if key.strip() in out:
            raise PlanError(f"--matrix {key.strip()} is given twice")
        out[key.strip()] = value.strip()
    return out


def choose_instance(
    found: Sequence[Scenario], combos: Sequence[Instance], wanted: dict[str, str]
) -> tuple[Scenario, tuple[str, ...]]:
    """The instance of ``found`` (one per ``combos``, in the same order) that ``wanted``
    selects, and the note saying which was taken when the choice was not complete."""
    values = [{k.removeprefix("matrix."): _text(v) for k, v in c.values.items()} for c in combos]
    keys = list(values[0]) if values else []
    if wanted and not keys:
        raise PlanError(f"--matrix: scenario {found[0].name!r} has no matrix")
    for key, value in wanted.items():
        if key not in keys:
            raise PlanError(f"--matrix {key}: the matrix has {', '.join(keys)}")
        if value not in {v[key] for v in values}:
            known = ", ".join(dict.fromkeys(v[key] for v in values))
            raise PlanError(f"--matrix {key}={value}: {key} is one of {known}")
    matching = [
        (s, v)
        for s, v in zip(found, values, strict=True)
        if all(v[k] == want for k, want in wanted.items())
    ]
    if not matching:
        raise PlanError(f"--matrix: no instance has {_spelled(wanted)}")
    scenario, chosen = matching[0]
    if len(matching) == 1:
        return scenario, ()
    names = ", ".join(s.name for s, _ in matching)
    open_keys = [k for k in keys if k not in wanted]
    choices = " ".join(
        f"--matrix {k}={'|'.join(dict.fromkeys(v[k] for _, v in matching))}" for k in open_keys
    )
    return scenario, (
        f"{len(matching)} matrix instances ({names}); bringing up the first, "
        f"{scenario.name} ({_spelled(chosen)}); choose with {choices}",
    )


def _spelled(values: dict[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in values.items())


def _matrix_instances(path: Path) -> list[Instance]:
    """The file's matrix combinations, in the order the loader makes its instances."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    combos, _ = instances(data.get("matrix") if isinstance(data, dict) else None)
    return combos


def scenario_plan(path: str | Path, matrix: Sequence[str] = ()) -> Plan:
    """The environment ``path`` declares (one matrix instance); the loader's
    :class:`~harness.scenario.InvalidScenario` for an invalid file, :class:`PlanError`
    for a wrong ``--matrix`` or what ``up`` cannot bring up."""
    wanted = parse_matrix_args(matrix)
    path = Path(path)
    found = load_scenario_instances(path)
    combos = _matrix_instances(path)
    if len(combos) != len(found):  # the loader made them from the same matrix
        raise PlanError(f"{path}: its matrix gives {len(combos)} instances, not {len(found)}")
    scenario, notes = choose_instance(found, combos, wanted)
    planned = plan_scenario(scenario, LOCAL)
    if planned.spec is None:
        raise PlanError(planned.error or planned.skip_reason or "")
    return Plan(planned.spec, scenario.modules, scenario=scenario, notes=notes)


def modules_line(modules: Sequence[Module]) -> str:
    """One line naming the catalog: what a user may put into an SKR Kyma's spec.modules."""
    if not modules:
        return "module catalog: empty (no module can be enabled)"
    shown = "; ".join(
        f"{m.name} ({', '.join(f'{c} {v}' for c, v in sorted(m.channels.items()))})"
        for m in modules
    )
    return f"modules in the KCP catalog: {shown} — enable one in an SKR Kyma's spec.modules"
