"""A Kyma's status from what one reconcile found. Pure.

KLM writes the KCP Kyma's status and copies it to the SKR Kyma (klm-reference §2.2, §2.6).
The state goes by severity (Error, Warning, Processing, Ready); condition types are ours
and stable. Times are kept while nothing changes, so a reconcile that changes nothing
writes nothing.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final

from harness.kcp.lifecycle_manager.kyma.modules import ModulePlan

READY: Final = "Ready"
PROCESSING: Final = "Processing"
WARNING: Final = "Warning"
ERROR: Final = "Error"
DELETING: Final = "Deleting"

CATALOG_CONDITION: Final = "ModuleCatalog"
MODULES_CONDITION: Final = "Modules"
WEBHOOK_CONDITION: Final = "SKRWebhook"

_SAID: Final = {
    (CATALOG_CONDITION, True): ("CatalogSynced", "module catalog synchronised to the SKR"),
    (CATALOG_CONDITION, False): ("CatalogNotSynced", "catalog not synced"),
    (MODULES_CONDITION, True): ("ModulesReady", "all modules are ready"),
    (MODULES_CONDITION, False): ("ModulesNotReady", "not ready: "),
    (WEBHOOK_CONDITION, True): ("WebhookInstalled", "the Runtime Watcher is installed in the SKR"),
    (WEBHOOK_CONDITION, False): ("WebhookNotInstalled", "the Runtime Watcher is not installed"),
}

Obj = Mapping[str, Any]


def timestamp(at: float | datetime | None = None) -> str:
    """RFC 3339 in whole seconds, as Kubernetes writes times (None: now)."""
    moment = (
        at
        if isinstance(at, datetime)
        else datetime.fromtimestamp(time.time() if at is None else at, UTC)
    )
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def deleting(at: float) -> dict[str, Any]:
    """The status a Kyma gets once its deletion began (upstream's state ``Deleting``)."""
    operation = {"operation": "removing the Kyma from its SKR", "lastUpdateTime": timestamp(at)}
    return {"state": DELETING, "lastOperation": operation}


def module_entry(plan: ModulePlan, manifest: Obj | None) -> dict[str, Any]:
    """One ``status.modules[]`` entry: an unresolved module is ``Error`` with the reason;
    a resolved one has its Manifest's state (``Processing`` until the Manifest has one)."""
    entry: dict[str, Any] = {"name": plan.name, "channel": plan.channel}
    if plan.template is None:
        return {**entry, "state": ERROR, "message": plan.error}
    template = plan.template["metadata"]
    state = PROCESSING
    if manifest is not None:
        state = str((manifest.get("status") or {}).get("state") or PROCESSING)
    return {
        **entry,
        "version": plan.version,
        "state": state,
        "manifest": {
            "name": manifest["metadata"]["name"] if manifest else "",
            "namespace": manifest["metadata"]["namespace"] if manifest else "",
        },
        "template": {"name": template["name"], "namespace": template["namespace"]},
    }


def aggregate(entries: Sequence[Obj], failures: Sequence[str] = ()) -> str:
    """The Kyma's state from its module entries and failed steps (see the module doc)."""
    states = {e.get("state") for e in entries}
    if failures or ERROR in states:
        return ERROR
    if WARNING in states:
        return WARNING
    if states - {READY}:
        return PROCESSING
    return READY


def condition(
    kind: str, ok: bool, reason: str, message: str, previous: Sequence[Obj], now: str
) -> dict[str, Any]:
    """A condition that keeps its ``lastTransitionTime`` while its status stays the same."""
    status = "True" if ok else "False"
    before = next((c for c in previous if c.get("type") == kind), None)
    since = before.get("lastTransitionTime") if before and before.get("status") == status else None
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": since or now,
    }


def kyma_status(
    previous: Obj | None,
    entries: Sequence[Obj],
    *,
    catalog_synced: bool,
    webhook_installed: bool | None = None,
    failures: Sequence[str] = (),
    extra_conditions: Sequence[Obj] = (),
    channel: str | None = None,
    at: float,
) -> dict[str, Any]:
    """The status to write (both Kymas). ``webhook_installed`` None: no ``SKRWebhook``
    condition; ``extra_conditions`` are informational (the state does not follow them)."""
    previous = previous or {}
    now = timestamp(at)
    state = aggregate(entries, failures)
    if webhook_installed is False and state == READY:  # Ready only with its watcher running
        state = PROCESSING
    conditions_before = previous.get("conditions") or []
    not_ready = [e["name"] for e in entries if e.get("state") != READY]
    checks = {CATALOG_CONDITION: catalog_synced, MODULES_CONDITION: not not_ready}
    if webhook_installed is not None:
        checks[WEBHOOK_CONDITION] = webhook_installed
    conditions = []
    for kind, ok in checks.items():
        reason, message = _SAID[kind, ok]
        if kind == MODULES_CONDITION and not ok:
            message += ", ".join(not_ready)
        conditions.append(condition(kind, ok, reason, message, conditions_before, now))
    conditions.extend(dict(c) for c in extra_conditions)
    operation = "; ".join(failures) if failures else f"kyma is {state.lower()}"
    last = previous.get("lastOperation") or {}
    when = last.get("lastUpdateTime") if last.get("operation") == operation else None
    status: dict[str, Any] = {
        "state": state,
        "modules": list(entries),
        "conditions": conditions,
        "lastOperation": {"operation": operation, "lastUpdateTime": when or now},
    }
    if channel:  # the channel the SKR Kyma asks for, as KLM reports it
        status["activeChannel"] = channel
    return status


def same_status(a: Obj | None, b: Obj | None) -> bool:
    """Whether two statuses say the same (our fields only; other writers' keys ignored)."""
    keys = ("state", "modules", "conditions", "lastOperation", "activeChannel")
    return all((a or {}).get(k) == (b or {}).get(k) for k in keys)
