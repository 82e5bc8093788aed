"""Running scenarios: a scenario's plan (``plan``: backend, environment, skipped steps),
its steps (``steps``, one executor per operation verb in ``actions``), expectations polled
against what the environment observed (``observe``), and the report built while it runs.

Layers, in the order a run uses them: ``plan`` (scenario → ScenarioPlan, pure, the
machine's tools asked apart; the EnvironmentSpec mapping in ``spec``) → ``session`` (the
environment as actions see it, and its fault and Watcher ports; built on
``cluster_session`` and ``https_requests``) → ``context`` (state shared by operations) →
``actions`` (an executor per verb) → ``steps`` (try/catch/finally, timeouts) →
``scenario`` → ``run`` (several plans, and the written reports).
``pytest_plugin`` makes scenario files pytest items; ``harness.cli.run`` is
``watcher-harness run``.
"""

from harness.runner.errors import (
    ExpectationFailed,
    OperationFailed,
    RunnerError,
)
from harness.runner.plan import ScenarioPlan, plan_scenario
from harness.runner.run import RunResult, new_run_id, run_all
from harness.runner.scenario import RunOptions, live_session, run_scenario
from harness.runner.session import LiveSession, Session

__all__ = [
    "ExpectationFailed",
    "LiveSession",
    "OperationFailed",
    "RunOptions",
    "RunResult",
    "RunnerError",
    "ScenarioPlan",
    "Session",
    "live_session",
    "new_run_id",
    "plan_scenario",
    "run_all",
    "run_scenario",
]
