"""TLS contexts built from files on disk, rebuilt when the files change.

cert-manager renews the webhook certificate every 30 days and Kubernetes swaps the mounted
Secret files in place, so the webhook must pick up new files without a restart. Upstream
re-reads the files on every request; we ``stat()`` them on a short interval (cheap) and
rebuild only when size, mtime or inode changed.

* Server side: the listening socket keeps one ``SSLContext`` for its lifetime. Its SNI
  callback (which OpenSSL calls for every handshake, with or without SNI) moves each new
  connection onto the newest context; connections already established keep theirs, so
  keep-alive connections survive a rotation.
* Client side: ``client_context`` returns the newest context; the KCP client passes it per
  request, and aiohttp keys pooled connections by context, so new connections use the new
  files while in-flight requests finish on the old ones.
* A rebuild that fails (files half written, key and cert out of step) keeps the previous
  contexts, logs once per file state and is retried on the next poll.
"""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
from collections.abc import Callable
from dataclasses import dataclass

from watcher.errors import CertificateError
from watcher.webhook.settings import TLSFiles

log = logging.getLogger("watcher.webhook.tls")

FileState = tuple[int, int, int, int] | None
Signature = tuple[FileState, ...]


def _stat(path: os.PathLike[str] | str) -> FileState:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino, st.st_dev)


def build_server_context(files: TLSFiles) -> ssl.SSLContext:
    """TLS 1.3 only, serving ``tls_cert``; the API server does not present a client cert."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    _load_chain(ctx, files)
    return ctx


def build_client_context(files: TLSFiles) -> ssl.SSLContext:
    """TLS 1.3 only, verifying the KCP against ``ca_cert`` (a bundle), presenting our cert."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    try:
        ctx.load_verify_locations(cafile=str(files.ca_cert))
    except (OSError, ssl.SSLError) as exc:
        raise CertificateError(f"CA bundle {files.ca_cert}: {exc}") from None
    _load_chain(ctx, files)
    return ctx


def _load_chain(ctx: ssl.SSLContext, files: TLSFiles) -> None:
    try:
        ctx.load_cert_chain(certfile=str(files.tls_cert), keyfile=str(files.tls_key))
    except (OSError, ssl.SSLError) as exc:
        raise CertificateError(
            f"certificate {files.tls_cert} with key {files.tls_key}: {exc}"
        ) from None


@dataclass(frozen=True)
class _Contexts:
    server: ssl.SSLContext
    client: ssl.SSLContext


class TLSReloader:
    """Owns the webhook's TLS contexts and keeps them in step with the files.

    ``load()`` must succeed once (a webhook without certificates is useless); afterwards
    ``check()`` (called by ``run()`` every ``interval`` seconds, or directly by tests)
    rebuilds on change. ``generation`` counts successful loads.
    """

    def __init__(self, files: TLSFiles, *, interval: float = 1.0) -> None:
        self.files = files
        self.interval = interval
        self.generation = 0
        self.failures = 0
        self._current: _Contexts | None = None
        self._listening: ssl.SSLContext | None = None
        self._loaded_sig: Signature = ()
        self._logged_failure_sig: Signature = ()
        self._task: asyncio.Task[None] | None = None
        self._listeners: list[Callable[[], None]] = []

    def _signature(self) -> Signature:
        return tuple(
            _stat(p) for p in (self.files.ca_cert, self.files.tls_cert, self.files.tls_key)
        )

    def load(self) -> None:
        """First load; raises ``CertificateError`` saying which file is unusable."""
        sig = self._signature()
        self._current = _Contexts(
            build_server_context(self.files), build_client_context(self.files)
        )
        self._loaded_sig = sig
        self.generation += 1
        listening = build_server_context(self.files)
        listening.sni_callback = self._on_handshake
        self._listening = listening

    def on_reload(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` after every successful rebuild (e.g. to drop idle connections)."""
        self._listeners.append(callback)

    @property
    def server_context(self) -> ssl.SSLContext:
        """The context to give the listening socket; it never changes, its SNI hook does."""
        if self._listening is None:
            raise RuntimeError("TLSReloader.load() was not called")
        return self._listening

    @property
    def client_context(self) -> ssl.SSLContext:
        """The newest client context; fetch it per request, do not keep it."""
        if self._current is None:
            raise RuntimeError("TLSReloader.load() was not called")
        return self._current.client

    def _on_handshake(
        self, sslobj: ssl.SSLObject | ssl.SSLSocket, server_name: str | None, ctx: ssl.SSLContext
    ) -> None:
        del server_name, ctx  # the listening context; the newest one may differ
        current = self._current
        if current is not None:
            sslobj.context = current.server

    def check(self) -> bool:
        """Rebuild if the files changed; True when new contexts are in use."""
        sig = self._signature()
        if sig == self._loaded_sig:
            return False
        try:
            contexts = _Contexts(build_server_context(self.files), build_client_context(self.files))
        except CertificateError as exc:
            self.failures += 1
            if sig != self._logged_failure_sig:
                self._logged_failure_sig = sig
                log.warning("TLS files changed but cannot be loaded; keeping the old ones: %s", exc)
            return False
        self._current = contexts
        self._loaded_sig = sig
        self.generation += 1
        log.info("TLS files reloaded (generation %d)", self.generation)
        for callback in self._listeners:
            callback()
        return True

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            self.check()

    def start(self) -> None:
        """Start polling in a background task named ``tls-reload``."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="tls-reload")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.wait([task])
