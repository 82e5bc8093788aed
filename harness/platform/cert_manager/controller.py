"""The harness's cert-manager: cert-manager's controllers for KLM on a cluster that runs none.

Watches (Certificates, Issuers, Secrets; all namespaces) only say *what* to look at again;
each look reads the objects fresh, so a late or coalesced event costs a re-read, never a
wrong decision. One work queue and a few workers: an object is never handled twice at
once, and at most that many keys are generated at a time (in threads). A timer per
Certificate wakes it at its renewal time, the one trigger no event brings.

As cert-manager: a deleted Certificate leaves its Secret, and a rotated CA re-issues
nothing (leaves keep their certificate and old ``ca.crt`` until their own renewal).
Unlike it: no CertificateRequests; the Issuing condition is only read (someone asking for
a re-issue, as KLM does) and removed once issued; a failed issuance is retried when
something it depends on changes, else after at most 30 s (cert-manager waits an hour).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any, Concatenate, Final, ParamSpec

from kubernetes_asyncio.client import ApiClient

from harness import kube
from harness.aio import Service
from harness.errors import HarnessError
from harness.kube import CERTIFICATES, ISSUERS, Obj, Resource
from harness.kube.watch import watch_objects
from harness.platform.cert_manager import decisions as d
from harness.platform.cert_manager import spec
from harness.platform.cert_manager.signing import issue, key_fits

logger = logging.getLogger("harness.platform.cert_manager")

RETRY_MAX: Final = 30.0
TIMER_SLACK: Final = 0.05
"""Seconds a renewal timer fires after the renewal time (which is whole seconds)."""

P = ParamSpec("P")
Item = tuple[str, str]
"""A unit of work: (kind, "namespace/name") for a Certificate or an Issuer."""


class CertManagerError(HarnessError, TimeoutError):
    """A Certificate was not issued in time (the message says what its status says), or
    the controller could not start."""


class CertManager(Service):
    """``async with CertManager(kcp_api) as cert_manager:`` on a cluster with cert-manager's
    CRDs (``fixtures/platform/cert-manager.yaml``); ``clock``: "now" (UTC) for every decision."""

    def __init__(
        self,
        api: ApiClient,
        *,
        clock: Callable[[], dt.datetime] | None = None,
        workers: int = 4,
        sync_within: float = 30.0,
    ) -> None:
        self._api = api
        self._clock = clock or (lambda: dt.datetime.now(dt.UTC))
        self._workers = workers
        self._sync_within = sync_within
        self.issued: Counter[str] = Counter()
        """``namespace/name`` → Secrets issued so far."""
        self._queue: asyncio.Queue[Item] = asyncio.Queue()
        self._queued: set[Item] = set()
        self._active: set[Item] = set()
        self._dirty: set[Item] = set()
        self._timers: dict[Item, asyncio.TimerHandle] = {}
        self._failures: Counter[Item] = Counter()
        self._refs: dict[str, tuple[str, str]] = {}
        """Certificate key → (its Secret's key, its Issuer's key), from the watch."""
        self._ca_secrets: dict[str, str] = {}
        """Issuer key → its CA Secret's key, from the watch."""
        self._said: set[tuple[str, str]] = set()

    async def start(self) -> None:
        synced = {r.plural: asyncio.Event() for r in (CERTIFICATES, ISSUERS, kube.SECRETS)}
        for resource in (CERTIFICATES, ISSUERS, kube.SECRETS):
            watch = self._watch(resource, synced[resource.plural])
            self.spawn(watch, f"cert-manager-watch-{resource.plural}")
        for n in range(self._workers):
            self.spawn(self._work(), f"cert-manager-worker-{n}")
        self.stack.callback(self._cancel_timers)
        try:
            async with asyncio.timeout(self._sync_within):
                await asyncio.gather(*(e.wait() for e in synced.values()))
        except TimeoutError:
            missing = ", ".join(n for n, e in synced.items() if not e.is_set())
            raise CertManagerError(
                f"the harness's cert-manager could not list {missing} within "
                f"{self._sync_within:g} s: are cert-manager's CRDs applied "
                "(fixtures/platform/cert-manager.yaml)? see the harness.kube warnings"
            ) from None

    def _cancel_timers(self) -> None:
        for handle in self._timers.values():
            handle.cancel()
        self._timers.clear()

    async def wait_issued(
        self, namespace: str, name: str, *, revision: int = 1, within: float = 30.0
    ) -> Obj:
        """The Certificate once ``status.revision >= revision`` and it is Ready for its
        generation; on timeout, ``CertManagerError`` saying what its status says."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        while True:
            obj = await kube.get(self._api, CERTIFICATES, name, namespace)
            if obj is not None and d.is_issued(obj, revision):
                return obj
            if loop.time() >= deadline:
                raise CertManagerError(
                    f"Certificate {namespace}/{name} was not issued (revision >= {revision}, "
                    f"Ready) within {within:g} s; {d.describe(obj)}"
                )
            await asyncio.sleep(0.05)

    # -- events, and a queue as client-go's: an item waits at most once, and one added while
    # -- it is handled is handled again afterwards, never twice at once

    async def _watch(self, resource: Resource, synced: asyncio.Event) -> None:
        async for kind, obj in watch_objects(self._api, resource):
            key = kube.object_key(obj)
            if kind == "SYNCED":
                synced.set()
            elif resource is CERTIFICATES:
                self._refs.pop(key, None)
                if kind != "DELETED":
                    self._refs[key] = spec.certificate_refs(obj)
                self._add(("Certificate", key))
            elif resource is ISSUERS:
                self._ca_secrets.pop(key, None)
                if kind != "DELETED":
                    self._ca_secrets[key] = spec.ca_secret_key(obj)
                self._add(("Issuer", key))
            else:
                for cert in [c for c, (secret, _) in self._refs.items() if secret == key]:
                    self._add(("Certificate", cert))
                for issuer in [i for i, secret in self._ca_secrets.items() if secret == key]:
                    self._add(("Issuer", issuer))

    def _add(self, item: Item) -> None:
        if item in self._active:
            self._dirty.add(item)
        elif item not in self._queued:
            self._queued.add(item)
            self._queue.put_nowait(item)

    async def _work(self) -> None:
        while True:
            item = await self._queue.get()
            self._queued.discard(item)
            self._active.add(item)
            try:
                await (self._certificate if item[0] == "Certificate" else self._issuer)(item[1])
                self._failures.pop(item, None)
            except Exception as exc:  # a bug must not stop the controller: log, retry
                self._failures[item] += 1
                delay = min(2.0 ** self._failures[item] / 4, RETRY_MAX)
                log = logger.warning if isinstance(exc, kube.KubeError) else logger.exception
                log("cert-manager: %s %s: %s; again in %.2g s", *item, exc, delay)
                self._after(item, delay)
            finally:
                self._active.discard(item)
                if item in self._dirty:
                    self._dirty.discard(item)
                    self._add(item)

    def _after(self, item: Item, delay: float | None) -> None:
        """Look at ``item`` again in ``delay`` s (None: on events only), not when it would."""
        if (handle := self._timers.pop(item, None)) is not None:
            handle.cancel()
        if delay is not None:
            loop = asyncio.get_running_loop()
            self._timers[item] = loop.call_later(max(delay, 0.0), self._add, item)

    def _say_once(self, key: str, text: str, level: int = logging.INFO) -> None:
        if (key, text) not in self._said:
            self._said.add((key, text))
            logger.log(level, "cert-manager: %s", text)

    # -- reconciling ----------------------------------------------------------------------

    async def _certificate(self, key: str) -> None:
        namespace, name = key.split("/", 1)
        obj = await kube.get(self._api, CERTIFICATES, name, namespace)
        cert = spec.parse_certificate(obj) if obj is not None else None
        if obj is None or not isinstance(cert, spec.Certificate):
            self._after(("Certificate", key), None)  # a deleted one leaves its Secret
            if obj is None:
                self._said = {s for s in self._said if s[0] != key}
            elif isinstance(cert, spec.Foreign):
                self._say_once(key, f"leaving {key} alone: its issuer is {cert.issuer}")
            elif isinstance(cert, spec.Invalid):
                self._say_once(key, f"{key} is invalid: {cert.message}", logging.WARNING)
                why = d.Why("InvalidSpec", cert.message)
                gen = spec.generation(obj)
                await self._write_status(
                    CERTIFICATES, obj, d.with_condition, d.READY, False, why, gen, self._clock()
                )
            return
        if cert.ignored:
            self._say_once(key, f"{key}: {', '.join(cert.ignored)} ignored (not served here)")
        stored = d.read_secret(await kube.get(self._api, kube.SECRETS, cert.secret_name, namespace))
        now = self._clock()
        reason = d.reissue_reason(cert, stored, obj.get("status") or {}, now)
        if reason is None:
            await self._write_status(CERTIFICATES, obj, d.certificate_status, cert, stored, now)
            self._after(("Certificate", key), self._until_renewal(cert, stored))
            return
        _, issuer = await self._issuer_state(namespace, cert.issuer_ref.name)
        if not issuer.ready:
            waiting = f'waiting for Issuer "{cert.issuer_ref.name}": {": ".join(issuer.why)}'
            self._say_once(key, f"{key} is {waiting}")
            await self._write_status(
                CERTIFICATES, obj, d.certificate_status, cert, stored, now, waiting=waiting
            )
            return
        keep = stored.key if cert.private_key.rotation_policy == "Never" else None
        reuse = keep if keep is not None and key_fits(keep, cert.private_key) else None
        issued = await asyncio.to_thread(issue, cert, issuer.signer, self._clock(), reuse)
        secret = d.secret_body(cert, issued, stored.type)
        await kube.apply(self._api, kube.SECRETS, secret, field_manager=d.FIELD_MANAGER)
        self.issued[key] += 1  # before the status says so: wait_issued may return at once
        stored = d.stored_of(cert, issued)
        status = await self._write_status(
            CERTIFICATES, obj, d.certificate_status, cert, stored, self._clock(), issued=True
        )
        self._said = {s for s in self._said if s[0] != key}
        logger.info("issued %s (revision %s): %s: %s", key, status.get("revision"), *reason)
        self._after(("Certificate", key), self._until_renewal(cert, stored))

    def _until_renewal(self, cert: spec.Certificate, stored: d.Stored) -> float | None:
        if stored.certificate is None:
            return None
        renewal = d.renewal_time(cert, stored.certificate)
        return (renewal - self._clock()).total_seconds() + TIMER_SLACK

    async def _issuer_state(self, namespace: str, name: str) -> tuple[Obj | None, d.IssuerState]:
        obj = await kube.get(self._api, ISSUERS, name, namespace)
        issuer = spec.parse_issuer(obj) if obj is not None else None
        ca = issuer.ca if isinstance(issuer, spec.Issuer) else None
        secret = await kube.get(self._api, kube.SECRETS, ca.secret_name, namespace) if ca else None
        return obj, d.issuer_state(name, issuer, secret)

    async def _issuer(self, key: str) -> None:
        namespace, name = key.split("/", 1)
        obj, state = await self._issuer_state(namespace, name)
        if obj is not None:
            gen = spec.generation(obj)
            await self._write_status(
                ISSUERS, obj, d.with_condition, d.READY, state.ready, state.why, gen, self._clock()
            )
        for cert in [c for c, (_, issuer) in self._refs.items() if issuer == key]:
            self._add(("Certificate", cert))

    async def _write_status(
        self,
        resource: Resource,
        obj: Obj,
        compute: Callable[Concatenate[Mapping[str, Any], P], dict[str, Any]],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> Mapping[str, Any]:
        """Write what ``compute`` makes of the status, guarded by the resourceVersion read;
        on a conflict read again and compute again (so an issuance counts exactly once)."""
        for _ in range(5):
            meta, old = obj["metadata"], obj.get("status") or {}
            new = compute(old, *args, **kwargs)
            if not (patch := d.status_patch(old, new)):
                return new
            body = {"metadata": {"resourceVersion": meta["resourceVersion"]}, "status": patch}
            name, namespace = meta["name"], meta.get("namespace")
            try:
                written = await kube.merge_patch(
                    self._api, resource, name, namespace, body, subresource="status"
                )
                return written.get("status") or {}
            except kube.Conflict:
                if (fresh := await kube.get(self._api, resource, name, namespace)) is None:
                    return new
                obj = fresh
        raise kube.KubeError(f"{resource.kind} {kube.object_key(obj)}: status writes conflict")
