"""The durable spool: an append-only on-disk journal of the events not yet delivered.

Why: in async mode an event lives only in the delivery queue after the admission answer;
a SIGKILL (OOM kill, liveness kill, crash) loses every queued event, and the API server
never asks again. With a spool the admission handler appends the event to a journal
*before* answering, the delivery marks it done (an acknowledgement tombstone) once it is
delivered or given up, and the next process replays what is left.

Format: segment files ``segment-<n>.jsonl`` in one directory, one JSON object per line:
``{"op":"add","id":7,"t":<unix time>,"path":"/v2/<manager>/event","body":"<event>"}`` and
``{"op":"ack","id":7}``. Ids grow across restarts. Each record is one ``write()`` on an
``O_APPEND`` descriptor with no user-space buffer, so once ``append`` returns the line is in
the kernel's page cache and survives a SIGKILL; only a power loss or kernel crash needs
``fsync`` (``sync_fd`` + :class:`GroupSync`, opt-in).

Compaction: when the current segment reaches ``segment_bytes`` (or twice the live data,
whichever is larger) the live records are copied into a fresh segment and the older
segments are deleted, so the directory holds one segment plus at most one being replaced.
Opening does the same after reading, so a line torn by a kill mid-write is never appended
to. Torn or otherwise unreadable lines are skipped and counted (``corrupt_lines``), never
fatal. The number of live records is bounded by the caller (the delivery queue's capacity
and overflow policy); this module does not drop anything itself.

Ownership: ``spool.lock`` is held with ``flock(LOCK_EX | LOCK_NB)`` for the spool's life;
a second process gets :class:`SpoolLockedError` naming the owner's pid. The kernel drops
the lock when its owner dies, SIGKILL included, so a restart never needs manual steps.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from watcher.errors import WatcherError

LOCK_NAME = "spool.lock"
SEGMENT = re.compile(r"^segment-(\d{12})\.jsonl$")
DEFAULT_SEGMENT_BYTES = 4 * 1024 * 1024


class SpoolError(WatcherError):
    """The spool directory cannot be used."""


class SpoolLockedError(SpoolError):
    """Another process owns the spool directory."""


@dataclass(frozen=True)
class SpoolRecord:
    """One event not yet acknowledged: its id, KCP path, body and first admission time."""

    id: int
    path: str
    body: bytes
    written_at: float


def _segment_name(number: int) -> str:
    return f"segment-{number:012d}.jsonl"


def _add_line(record: SpoolRecord) -> bytes:
    doc = {
        "op": "add",
        "id": record.id,
        "t": round(record.written_at, 6),
        "path": record.path,
        # Event bodies are JSON (UTF-8); surrogateescape round-trips any other byte.
        "body": record.body.decode("utf-8", "surrogateescape"),
    }
    return json.dumps(doc, separators=(",", ":")).encode("utf-8", "surrogateescape") + b"\n"


def _ack_line(record_id: int) -> bytes:
    return b'{"op":"ack","id":%d}\n' % record_id


def _parse(line: bytes) -> tuple[str, int, SpoolRecord | None] | None:
    """``(op, id, record)`` or None if the line is not a well-formed record."""
    try:
        doc: Any = json.loads(line.decode("utf-8", "surrogateescape"))
    except (ValueError, RecursionError):
        return None
    if not isinstance(doc, dict):
        return None
    op, rid = doc.get("op"), doc.get("id")
    if not isinstance(rid, int) or isinstance(rid, bool) or rid < 1:
        return None
    if op == "ack":
        return "ack", rid, None
    path, body, t = doc.get("path"), doc.get("body"), doc.get("t")
    if op != "add" or not isinstance(path, str) or not isinstance(body, str):
        return None
    if not isinstance(t, int | float) or isinstance(t, bool):
        return None
    try:
        raw = body.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return None
    return "add", rid, SpoolRecord(rid, path, raw, float(t))


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def sync_fd(fd: int) -> None:
    """``fdatasync`` where the platform has it (the data is what matters), else ``fsync``."""
    getattr(os, "fdatasync", os.fsync)(fd)


class Spool:
    """The journal in ``directory``; ``open()`` → ``append``/``ack`` … → ``close()``.

    Synchronous on purpose: an append is one small ``write()`` to the page cache (a few
    microseconds), cheaper than a thread hop. ``fsync=True`` makes segment creation and
    compaction durable too; per-append durability is :class:`GroupSync`'s job.
    """

    def __init__(
        self,
        directory: Path,
        *,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        fsync: bool = False,
        wall: Callable[[], float] = time.time,
    ) -> None:
        if segment_bytes < 1:
            raise ValueError("segment_bytes must be at least 1")
        self.directory = directory
        self.segment_bytes = segment_bytes
        self.fsync = fsync
        self._wall = wall
        self._lock_fd: int | None = None
        self._fd: int | None = None
        self._segment = 0
        self._size = 0
        self._next_id = 1
        self._live: dict[int, bytes] = {}  # id -> its add line, for compaction
        self._live_bytes = 0
        self.appended = 0  # adds written by this process; GroupSync's sequence number
        self.corrupt_lines = 0
        self.compactions = 0

    # ------------------------------------------------------------------ facts

    @property
    def live(self) -> int:
        """Records appended and not yet acknowledged."""
        return len(self._live)

    @property
    def size_bytes(self) -> int:
        """Bytes in the current segment (the only one between compactions)."""
        return self._size

    @property
    def fd(self) -> int:
        if self._fd is None:
            raise SpoolError(f"spool {self.directory} is not open")
        return self._fd

    # ------------------------------------------------------------------ lifecycle

    def open(self) -> list[SpoolRecord]:
        """Lock, read every segment, compact into a fresh one; the live records in id order."""
        if self._fd is not None:
            raise SpoolError(f"spool {self.directory} is already open")
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._lock()
        try:
            old = self._segments()
            records = self._read(old)
            self._next_id = max([self._next_id, *(r.id + 1 for r in records)])
            self._live = {r.id: _add_line(r) for r in records}
            self._live_bytes = sum(len(line) for line in self._live.values())
            self._segment = (old[-1][0] if old else 0) + 1
            self._start_segment(old)
        except BaseException:
            self.close()
            raise
        return records

    def close(self) -> None:
        """Close the segment and release the lock; the files stay for the next process."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)
        lock_fd, self._lock_fd = self._lock_fd, None
        if lock_fd is not None:
            os.close(lock_fd)  # closing the last descriptor releases the flock

    def _lock(self) -> None:
        path = self.directory / LOCK_NAME
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            owner = os.read(fd, 32).decode("ascii", "replace").strip() or "unknown"
            os.close(fd)
            raise SpoolLockedError(
                f"spool directory {self.directory} is in use by another process (pid {owner}); "
                "each webhook needs a spool directory of its own"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._lock_fd = fd

    def _segments(self) -> list[tuple[int, Path]]:
        found = []
        for entry in self.directory.iterdir():
            match = SEGMENT.match(entry.name)
            if match:
                found.append((int(match.group(1)), entry))
        return sorted(found)

    def _read(self, segments: list[tuple[int, Path]]) -> list[SpoolRecord]:
        live: dict[int, SpoolRecord] = {}
        acked: set[int] = set()
        for _, path in segments:
            data = path.read_bytes()
            lines = data.split(b"\n")
            if lines and lines[-1] == b"":
                lines.pop()  # the file ends with a newline: no torn tail
            for line in lines:
                parsed = _parse(line)
                if parsed is None:
                    self.corrupt_lines += 1
                    continue
                op, rid, record = parsed
                self._next_id = max(self._next_id, rid + 1)
                if op == "ack":
                    acked.add(rid)
                    live.pop(rid, None)
                elif record is not None and rid not in acked:
                    live[rid] = record
        return [live[rid] for rid in sorted(live)]

    def _start_segment(self, older: list[tuple[int, Path]]) -> None:
        """Write the live records into segment ``self._segment``, then drop ``older``."""
        path = self.directory / _segment_name(self._segment)
        fd = os.open(
            path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND | os.O_CLOEXEC, 0o600
        )
        try:
            data = b"".join(self._live[rid] for rid in sorted(self._live))
            _write_all(fd, data)
            if self.fsync:
                sync_fd(fd)
                self._sync_directory()
        except BaseException:
            os.close(fd)
            raise
        previous, self._fd, self._size = self._fd, fd, len(data)
        if previous is not None:
            os.close(previous)
        for _, old in older:
            old.unlink(missing_ok=True)
        if self.fsync and older:
            self._sync_directory()

    def _sync_directory(self) -> None:
        dfd = os.open(self.directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)

    # ------------------------------------------------------------------ journal

    def append(self, path: str, body: bytes) -> int:
        """Journal one event (one ``write()``); returns its id for :meth:`ack`."""
        record = SpoolRecord(self._next_id, path, body, self._wall())
        line = _add_line(record)
        _write_all(self.fd, line)
        self._next_id += 1
        self._live[record.id] = line
        self._live_bytes += len(line)
        self._size += len(line)
        self.appended += 1
        self._maybe_compact()
        return record.id

    def ack(self, record_id: int) -> None:
        """The event is done (delivered or given up): it will not be replayed."""
        line = self._live.pop(record_id, None)
        if line is None:
            return
        self._live_bytes -= len(line)
        ack = _ack_line(record_id)
        _write_all(self.fd, ack)
        self._size += len(ack)
        self._maybe_compact()

    def _maybe_compact(self) -> None:
        if self._size < max(self.segment_bytes, 2 * self._live_bytes):
            return
        current = self._segment
        self._segment += 1
        self._start_segment([(current, self.directory / _segment_name(current))])
        self.compactions += 1


class GroupSync:
    """Makes appends durable before the admission answers, sharing one fsync among many.

    An fsync covers everything written before it started, so concurrent admissions wait
    for the same one (group commit) instead of queueing one fsync each. The fsync runs in
    a thread on a duplicate of the segment's descriptor, so a compaction meanwhile cannot
    close it under the thread (the new segment is fsynced by the compaction itself).
    """

    def __init__(self, spool: Spool, on_error: Callable[[Exception], None]) -> None:
        self._spool = spool
        self._on_error = on_error
        self._synced = 0
        self._task: asyncio.Task[None] | None = None
        self.fsyncs = 0

    async def wait(self) -> None:
        """Return once every append made so far is on stable storage (or failed to be)."""
        target = self._spool.appended
        while self._synced < target:
            if self._task is None:
                self._task = asyncio.create_task(self._sync())
            await asyncio.shield(self._task)

    async def _sync(self) -> None:
        upto = self._spool.appended
        try:
            fd = os.dup(self._spool.fd)
            try:
                await asyncio.to_thread(sync_fd, fd)
            finally:
                os.close(fd)
            self.fsyncs += 1
        except (OSError, SpoolError) as exc:
            self._on_error(exc)  # counted and logged; the admission must not hang on it
        finally:
            self._synced = max(self._synced, upto)
            self._task = None
