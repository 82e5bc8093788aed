"""What a Lifecycle-Manager reconcile is selected by in a scenario: its trigger and its
outcome (one, or a list of alternatives). Shared by ``reconciles`` and ``timeline``."""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from pydantic import BeforeValidator, Field, WithJsonSchema

ReconcileTrigger = Literal[
    "startup",
    "requeue-timer",
    "watch-event",
    "kyma-created",
    "kyma-changed",
    "manifest-changed",
    "certificate-renewed",
    "watcher-health",
    "watcher-recovered",
]
ReconcileOutcome = Literal["success", "busy", "warning", "error", "skipped"]
RECONCILE_OUTCOMES: tuple[str, ...] = get_args(ReconcileOutcome)


def _one_or_many(value: Any) -> Any:
    """``error`` is ``[error]``: one outcome or a list of alternatives."""
    return [value] if isinstance(value, str) else value


Outcomes = Annotated[
    tuple[ReconcileOutcome, ...],
    BeforeValidator(_one_or_many),
    Field(min_length=1),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "string", "enum": list(RECONCILE_OUTCOMES)},
                {
                    "type": "array",
                    "items": {"type": "string", "enum": list(RECONCILE_OUTCOMES)},
                    "minItems": 1,
                },
            ]
        }
    ),
]
"""One reconcile outcome, or a non-empty list of alternatives."""
