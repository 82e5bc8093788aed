"""The in-process KLM observed through its log, as a KLM process is.

A KLM process (:class:`harness.kcp.klm_process.KlmProcess`) is seen through the lines it
logs; the harness's in-process KLM logs the very same lines through Python's logging.
:func:`capture_reconciles` gives that KLM a logger of its own whose records go through
the same reading (:func:`harness.kcp.klm_log.observe` into a
:class:`~harness.kcp.klm_log.ReconcileHistory`), so a scenario's ``reconciles`` come
from the log for both, not from the in-process KLM's records.

The logger does not pass its INFO lines up (a run's console stays quiet); warnings and
errors go on to the parent logger's handlers as before.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable

from harness.kcp.klm_log import LogRecord, ReconcileHistory, observe

_instances = itertools.count(1)


class HistoryHandler(logging.Handler):
    """Reads each record as :class:`~harness.kcp.klm_log.KlmProcess` reads a log line."""

    def __init__(self, history: ReconcileHistory) -> None:
        super().__init__(logging.INFO)
        self.history = history

    def emit(self, record: logging.LogRecord) -> None:
        context = getattr(record, "context", None)
        line = LogRecord(
            at=record.created,
            level=record.levelname,
            message=record.getMessage(),
            logger=record.name,
            context=context if isinstance(context, dict) else {},
        )
        observation = observe(line)
        if observation is not None:
            self.history.add(observation)


class _ToParent(logging.Handler):
    """Warnings and errors on to ``parent``'s handlers (the logger does not propagate)."""

    def __init__(self, parent: logging.Logger) -> None:
        super().__init__(logging.WARNING)
        self.parent = parent

    def emit(self, record: logging.LogRecord) -> None:
        self.parent.handle(record)


def capture_reconciles(
    history: ReconcileHistory, parent: str
) -> tuple[logging.Logger, Callable[[], None]]:
    """A logger under ``parent`` feeding ``history``, and the call that detaches it."""
    log = logging.getLogger(f"{parent}.capture-{next(_instances)}")
    log.setLevel(logging.INFO)
    log.propagate = False
    handlers = (HistoryHandler(history), _ToParent(logging.getLogger(parent)))
    for handler in handlers:
        log.addHandler(handler)

    def release() -> None:
        for handler in handlers:
            log.removeHandler(handler)

    return log, release


__all__ = ["HistoryHandler", "capture_reconciles"]
