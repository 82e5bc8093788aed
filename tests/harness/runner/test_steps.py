"""Step semantics: try in order until the first failure, catch only after a failure,
finally always; per-step and whole-scenario timeouts; later steps skipped."""

from __future__ import annotations

import time

import pytest
from runner_fake import FakeSession, opener

from harness.faults import (
    DropOldCa,
    KcpFault,
    Lifecycle,
    Part,
    PartFault,
    RotateCa,
    RotateLeaves,
    kcp_injection,
)
from harness.report import ReportBuilder, ScenarioReport, Status
from harness.report.model import Branch
from harness.runner import RunOptions, plan_scenario, run_scenario
from harness.scenario import loads_scenario

pytestmark = pytest.mark.usefixtures("no_leaked_tasks")

HEAD = "name: steps\nclusters: {skrs: [{name: skr-a}]}\n"


def patch(name: str) -> str:
    return (
        "{patch: {cluster: skr-a, resource: configmaps, namespace: default, "
        f"name: {name}, patch: {{data: {{a: b}}}}}}}}"
    )


async def run(text: str, session: FakeSession | None = None) -> tuple[ScenarioReport, FakeSession]:
    session = session or FakeSession()
    builder = ReportBuilder("test")
    report = await run_scenario(
        plan_scenario(loads_scenario(HEAD + text)),
        builder.scenario("steps", "steps.yaml"),
        RunOptions(open_session=opener(session)),
    )
    return report, session


async def test_try_runs_in_order_and_finally_always() -> None:
    report, session = await run(
        f"""steps:
  - name: ok
    try: [{patch("one")}, {patch("two")}]
    catch: [{patch("catch")}]
    finally: [{patch("finally")}]
"""
    )
    assert [c.split()[2] for c in session.calls] == [
        "default/one",
        "default/two",
        "default/finally",
    ]
    assert report.status is Status.SKIPPED  # every block passed, but nothing was checked
    assert report.error == "checked nothing"
    assert [(s.branch, s.status) for s in report.steps] == [
        (Branch.TRY, Status.PASSED),
        (Branch.FINALLY, Status.PASSED),
    ]


async def test_failure_stops_try_then_catch_then_finally() -> None:
    report, session = await run(
        f"""steps:
  - name: broken
    try: [{patch("one")}, {patch("fail")}, {patch("never")}]
    catch: [{patch("catch")}]
    finally: [{patch("finally")}]
  - name: later
    try: [{patch("later")}]
"""
    )
    objects = [c.split()[2] for c in session.calls]
    assert objects == ["default/one", "default/fail", "default/catch", "default/finally"]
    assert report.status is Status.FAILED
    try_report = report.steps[0]
    assert try_report.error is not None and try_report.error.startswith("try[1] patch: KubeError")
    assert [(s.name, s.branch, s.status) for s in report.steps] == [
        ("broken", Branch.TRY, Status.FAILED),
        ("broken", Branch.CATCH, Status.PASSED),
        ("broken", Branch.FINALLY, Status.PASSED),
        ("later", Branch.TRY, Status.SKIPPED),
    ]


async def test_step_timeout_fails_the_step_and_finally_still_runs() -> None:
    started = time.monotonic()
    report, session = await run(
        f"""steps:
  - name: slow
    timeout: 200ms
    try: [{{wait: 5s}}]
    finally: [{patch("cleanup")}]
"""
    )
    assert time.monotonic() - started < 2
    assert report.steps[0].error == "try[0] wait: step timed out after 200ms"
    assert session.calls == ["patch skr-a default/cleanup"]
    assert report.status is Status.FAILED


async def test_scenario_timeout_ends_the_run_with_an_error() -> None:
    started = time.monotonic()
    report, _ = await run(
        """timeout: 300ms
steps:
  - name: a
    try: [{wait: 200ms}]
  - name: b
    try: [{wait: 5s}]
"""
    )
    assert time.monotonic() - started < 2
    assert report.error == "scenario timed out after 300ms"
    assert report.status is Status.FAILED


async def test_faults_and_watcher_changes_reach_the_session_and_the_timeline() -> None:
    report, session = await run(
        """watchers:
  - default: true
  - name: cms
    manager: config-manager
    resource: configmaps
    service: {name: cm-events, port: 8084}
listeners:
  - component: config-manager
    service: {name: cm-events, port: 8084}
steps:
  - name: faults
    try:
      - fault: {action: kill, target: webhook/skr-a}
      - fault: {kcp: {delay: 100ms, abortPercent: 50}}
      - fault: {kcp: null}
      - fault: {rotate: leaf, clusters: [skr-a]}
      - fault: {rotate: ca}
      - fault: {rotate: drop-old-ca}
      - watcher: {delete: cms}
"""
    )
    assert session.calls == [
        f"fault {PartFault(Part.WEBHOOK, 'skr-a', Lifecycle.KILL)!r}",
        f"fault {KcpFault(kcp_injection(delay=0.1, abort_percent=50.0))!r}",
        f"fault {KcpFault(None)!r}",
        f"fault {RotateLeaves(('skr-a',))!r}",
        f"fault {RotateCa()!r}",
        f"fault {DropOldCa()!r}",
        "watcher delete kcp-system/cms",
    ]
    assert report.status is Status.SKIPPED  # it ran, but checked nothing
    faults = [t for t in report.timeline if t.kind.value == "fault"]
    assert len(faults) == 7
    assert [p.name for p in report.processes] == ["fake-apiserver"]


async def test_apply_from_a_file_is_relative_to_the_scenario(tmp_path: object) -> None:
    from pathlib import Path

    directory = Path(str(tmp_path))
    (directory / "cm.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: from-file, namespace: default}\n"
        "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: second, namespace: default}\n"
    )
    file = directory / "s.yaml"
    file.write_text(
        HEAD + "steps:\n  - name: a\n    try: [{apply: {cluster: skr-a, file: cm.yaml}}]\n"
    )
    from harness.scenario import load_scenario

    session = FakeSession()
    report = await run_scenario(
        plan_scenario(load_scenario(file)),
        ReportBuilder("t").scenario("steps", str(file)),
        RunOptions(open_session=opener(session)),
    )
    assert report.status is Status.SKIPPED  # it ran, but checked nothing
    assert session.calls == ["apply skr-a default/from-file", "apply skr-a default/second"]
