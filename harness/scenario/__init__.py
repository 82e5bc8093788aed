"""Scenario files: the model (what a scenario says), the loader (YAML → model, with located
errors), per-run names and the generated JSON Schema. Pure: no processes, no I/O beyond
reading the files."""

from harness.scenario.clusters import KCP, Certificate, CertificateKind
from harness.scenario.errors import InvalidScenario, ScenarioError
from harness.scenario.expectations import (
    Count,
    EventExpectation,
    Expect,
    Latency,
    MetricExpectation,
    ReconcileExpectation,
    RejectionExpectation,
    Truth,
    WriteLatency,
)
from harness.scenario.fault_ops import BreakFault, KcpFault, ProcessFault, RotateFault
from harness.scenario.kymas import default_kymas
from harness.scenario.loader import (
    dump_scenario,
    load_scenario,
    load_scenario_instances,
    loads_scenario,
    loads_scenario_instances,
)
from harness.scenario.model import Scenario
from harness.scenario.names import instance_names
from harness.scenario.operations import (
    Apply,
    ApplyOp,
    AssertOp,
    Churn,
    ChurnOp,
    CollectOp,
    Delete,
    DeleteOp,
    ErrorOp,
    ExpectOp,
    FaultOp,
    OutputCheck,
    Patch,
    PatchOp,
    RequestOp,
    Script,
    ScriptOp,
    SetOp,
    WaitOp,
    WatcherChange,
    WatcherOp,
)
from harness.scenario.requests import Request
from harness.scenario.selections import EVERY_SKR, Assert, Collect, Selection
from harness.scenario.settings import Certificates, Health
from harness.scenario.steps import Step
from harness.scenario.timeline import ObjectWatch, TimelineExpectation, object_watches
from harness.scenario.values import ResourceRef, format_duration, parse_duration
from harness.scenario.watchers import DefaultWatcher, WatcherDef

__all__ = [
    "EVERY_SKR",
    "KCP",
    "Apply",
    "ApplyOp",
    "Assert",
    "AssertOp",
    "BreakFault",
    "Certificate",
    "CertificateKind",
    "Certificates",
    "Churn",
    "ChurnOp",
    "Collect",
    "CollectOp",
    "Count",
    "DefaultWatcher",
    "Delete",
    "DeleteOp",
    "ErrorOp",
    "EventExpectation",
    "Expect",
    "ExpectOp",
    "FaultOp",
    "Health",
    "InvalidScenario",
    "KcpFault",
    "Latency",
    "MetricExpectation",
    "ObjectWatch",
    "OutputCheck",
    "Patch",
    "PatchOp",
    "ProcessFault",
    "ReconcileExpectation",
    "RejectionExpectation",
    "Request",
    "RequestOp",
    "ResourceRef",
    "RotateFault",
    "Scenario",
    "ScenarioError",
    "Script",
    "ScriptOp",
    "Selection",
    "SetOp",
    "Step",
    "TimelineExpectation",
    "Truth",
    "WaitOp",
    "WatcherChange",
    "WatcherDef",
    "WatcherOp",
    "WriteLatency",
    "default_kymas",
    "dump_scenario",
    "format_duration",
    "instance_names",
    "load_scenario",
    "load_scenario_instances",
    "loads_scenario",
    "loads_scenario_instances",
    "object_watches",
    "parse_duration",
]
