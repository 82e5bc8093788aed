"""The last resort for process groups whose owner never got to stop them.

:class:`~harness.clusters.process.OwnedProcess` stops its group when its ``async with``
ends; when that never runs (an unhandled Ctrl-C, SIGTERM to the harness), etcd and the API
servers would outlive the interpreter. Every owner registers its group here, and the
groups still registered are killed at interpreter exit (which also follows an unhandled
Ctrl-C) and on SIGTERM if nobody else handles that signal. Module-level on purpose: it must
outlive every owner.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import threading
from types import FrameType


class SafetyNet:
    """Kills the registered process groups when the interpreter ends."""

    def __init__(self) -> None:
        self._groups: dict[int, str] = {}
        self._lock = threading.Lock()
        self._installed = False

    def register(self, pgid: int, name: str) -> None:
        with self._lock:
            self._groups[pgid] = name
            if not self._installed:
                self._installed = True
                atexit.register(self.kill_all)
                self._install_sigterm_handler()

    def unregister(self, pgid: int) -> None:
        with self._lock:
            self._groups.pop(pgid, None)

    def owned(self) -> dict[int, str]:
        with self._lock:
            return dict(self._groups)

    def kill_all(self) -> None:
        with self._lock:
            groups, self._groups = self._groups, {}
        for pgid in groups:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)

    def _install_sigterm_handler(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            return  # someone else owns SIGTERM; atexit still covers a clean exit

        def on_sigterm(signum: int, frame: FrameType | None) -> None:
            self.kill_all()
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)

        signal.signal(signal.SIGTERM, on_sigterm)


safety_net = SafetyNet()


def owned_process_groups() -> dict[int, str]:
    """Process groups started by :class:`~harness.clusters.process.OwnedProcess` and not
    yet stopped (pgid → name)."""
    return safety_net.owned()
