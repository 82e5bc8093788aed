"""What a person watching ``make soak`` sees: a rich progress bar on a terminal, a plain
line every ``every`` seconds otherwise (CI logs stay short)."""

from __future__ import annotations

import time
from collections.abc import Sequence

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeRemainingColumn

from harness.clusters.progress import format_bytes, interactive, make_console
from harness.soak.model import Sample


class SoakProgress:
    """Counts writes and shows the latest RSS/fd readings; ``close()`` ends the display."""

    def __init__(self, console: Console | None = None, *, every: float = 30.0) -> None:
        self.console = console or make_console()
        self.writes = 0
        self.failed = 0
        self.total = 0
        self.events = 0
        self._latest: dict[str, Sample] = {}
        self._every = every
        self._last_line = 0.0
        self._started = time.monotonic()
        self._progress: Progress | None = None
        self._task: TaskID | None = None

    def phase(self, text: str) -> None:
        self.console.print(f"soak: {text}")

    def start(self, total: int) -> None:
        self.total = total
        self._started = time.monotonic()
        if interactive(self.console):
            self._progress = Progress(
                TextColumn("soak"),
                BarColumn(),
                TextColumn("{task.completed}/{task.total} writes"),
                TextColumn("{task.fields[detail]}"),
                TimeRemainingColumn(),
                console=self.console,
            )
            self._progress.start()
            self._task = self._progress.add_task("churn", total=total, detail="")

    def wrote(self, ok: bool) -> None:
        self.writes += 1
        self.failed += not ok

    def sampled(self, batch: Sequence[Sample], events: int) -> None:
        self.events = events
        for s in batch:
            self._latest[s.process] = s
        detail = self._detail()
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, completed=self.writes, detail=detail)
            return
        now = time.monotonic()
        if now - self._last_line >= self._every:
            self._last_line = now
            elapsed = now - self._started
            self.console.print(
                f"soak: {elapsed:5.0f} s  {self.writes}/{self.total} writes  {detail}"
            )

    def _detail(self) -> str:
        """Events, failures and the largest webhook's RSS and fds (one short line)."""
        hooks = [s for n, s in self._latest.items() if n.startswith("webhook/") and s.rss]
        head = f"{self.events} events, {self.failed} failed"
        if not hooks:
            return head
        rss = max(s.rss or 0 for s in hooks)
        fds = max(s.fds or 0 for s in hooks)
        return f"{head}; webhooks <= {format_bytes(rss)}, <= {fds} fds"

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None
