"""The harness's exception tree: callers catch ``HarnessError`` to handle any of ours.

Messages are meant to be shown to a user as they are: they say what failed, where, and
what to look at next (a log path, a command to run).
"""

from __future__ import annotations


class HarnessError(Exception):
    """Base of every error the ``harness`` package raises on purpose."""


class BinaryUnavailable(HarnessError, FileNotFoundError):
    """A required program (go, etcd, kube-apiserver) cannot be found or obtained.

    The message says how to install it. Tests skip on this error and only on this one.
    """


class VersionMismatch(HarnessError, ValueError):
    """Two places that pin the same version disagree; the message says which to update."""


class BuildError(HarnessError, RuntimeError):
    """Building a binary failed; the message holds the tail of the build log."""


class ProcessError(HarnessError, RuntimeError):
    """An owned external process failed to start, to become ready, or to stop."""


class ProcessExitedEarly(ProcessError):
    """The process exited before it became ready."""


class ProcessNotReady(ProcessError, TimeoutError):
    """The process kept running but its readiness probe did not pass before the deadline."""


class ClusterError(HarnessError, RuntimeError):
    """A cluster (etcd + kube-apiserver) could not be started or used."""
