"""Running scenarios: a scenario's environment (``spec``), its steps (``steps``, one module
per operation verb in ``actions``), expectations polled against what the environment
observed (``evaluate``), and the report built while it runs.

Layers, in the order a run uses them: ``spec`` (scenario → EnvironmentSpec, pure) →
``session`` (the environment as actions see it) → ``context`` (state shared by operations)
→ ``actions/<verb>`` → ``steps`` (try/catch/finally, timeouts) → ``scenario`` (one
scenario) → ``run`` (several, and the written reports). ``pytest_plugin`` makes scenario
files pytest items; ``harness.cli.run`` is ``watcher-harness run``.
"""

from harness.runner.errors import (
    ExpectationFailed,
    OperationFailed,
    RunnerError,
    StepTimeout,
    UnsupportedScenario,
)
from harness.runner.run import RunResult, new_run_id, run_all
from harness.runner.scenario import RunOptions, live_session, run_scenario
from harness.runner.session import LiveSession, Session
from harness.runner.spec import environment_spec

__all__ = [
    "ExpectationFailed",
    "LiveSession",
    "OperationFailed",
    "RunOptions",
    "RunResult",
    "RunnerError",
    "Session",
    "StepTimeout",
    "UnsupportedScenario",
    "environment_spec",
    "live_session",
    "new_run_id",
    "run_all",
    "run_scenario",
]
