"""Errors of the run report (``harness.report``); all are ``HarnessError``s."""

from __future__ import annotations

from harness.errors import HarnessError


class ReportError(HarnessError):
    """Base of the report package's errors."""


class ReportFormatError(ReportError, ValueError):
    """A stored report (JSON) cannot be read back; the message names the field."""
