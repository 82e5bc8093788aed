"""Admissions the API server really made, against the ones the ground truth routes. Pure.

Why: the kube-apiserver may call a validating webhook twice for one write (a stale watch
cache copy makes ``GuaranteedUpdate`` retry, admission included), and each admission can
queue an event. The oracle must not loosen its duplicate rule blindly, so it counts what
happened: ``apiserver_admission_webhook_request_total`` before and after a churn, minus
the (write, webhook) pairs the truth routes, is the number of *repeated admissions*; only
that many duplicates are explained (:func:`harness.expect.match.match_events`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from prometheus_client.parser import text_string_to_metric_families

from harness.churn.model import ExecutedMutation
from harness.churn.truth import Truth

WEBHOOK_REQUESTS = "apiserver_admission_webhook_request_total"
"""The API server's count of validating/mutating webhook calls (labels name, type, ...)."""

AdmissionCounts = Mapping[str, float]
"""Webhook name → calls the API server made to it (all operations and outcomes)."""


def webhook_calls(metrics_text: str) -> dict[str, float]:
    """Validating webhook calls by webhook name, from an API server's ``/metrics`` text."""
    calls: dict[str, float] = {}
    for family in text_string_to_metric_families(metrics_text):
        for sample in family.samples:
            if sample.name != WEBHOOK_REQUESTS or sample.labels.get("type") != "validating":
                continue
            name = sample.labels.get("name", "")
            calls[name] = calls.get(name, 0.0) + sample.value
    return calls


Gap = AdmissionCounts | None
"""An API server's downtime during a churn: its counters as last read before it stopped
(``None``: unreadable). Counters live in the process, so the next incarnation counts from
zero."""


def admissions_made(
    before: AdmissionCounts | None,
    after: AdmissionCounts | None,
    webhooks: Mapping[str, str],
    gaps: Sequence[Gap] = (),
) -> dict[str, int] | None:
    """Manager → admissions between two readings, over the webhooks of ``webhooks``
    (webhook name → manager), summed over the API server's incarnations when ``gaps``
    says where it stopped. ``None`` when a reading is missing or a counter went down
    within one incarnation (an unannounced restart: the count is unknown).

    Admissions between the reading before a stop and the process's exit are not counted;
    they are few (the server stops listening at once) and undercounting only makes the
    duplicate check stricter."""
    starts: list[AdmissionCounts | None] = [before, *({} for _ in gaps)]
    ends: list[AdmissionCounts | None] = [*gaps, after]
    made: Counter[str] = Counter()
    for start, end in zip(starts, ends, strict=True):
        if start is None or end is None:
            return None
        for name, manager in webhooks.items():
            delta = end.get(name, 0.0) - start.get(name, 0.0)
            if delta < 0:
                return None
            made[manager] += round(delta)
    return dict(made)


def admissions_routed(
    truth: Truth, executed: Iterable[ExecutedMutation]
) -> Counter[tuple[str, str]]:
    """(cluster, manager) → (write, webhook) pairs the truth routes (sure or uncertain)."""
    cluster_of = {e.id: e.mutation.cluster for e in executed}
    return Counter((cluster_of[d.mutation_id], d.manager) for d in truth.deliveries)


def repeated_admissions(
    routed: Mapping[tuple[str, str], int],
    made: Mapping[str, Mapping[str, int] | None],
    runtime_ids: Mapping[str, str],
    *,
    other_writes: Mapping[str, int] | None = None,
) -> dict[tuple[str, str], int]:
    """(manager, runtime id) → admissions beyond one per routed write.

    ``made``: cluster → manager → admissions counted (``None``: unknown → no repeat is
    assumed). ``other_writes``: cluster → writes the scenario made besides the churn in
    the same interval; each may have been admitted once, so they are subtracted too."""
    out: dict[tuple[str, str], int] = {}
    for cluster, per_manager in made.items():
        if per_manager is None or cluster not in runtime_ids:
            continue
        extra_writes = (other_writes or {}).get(cluster, 0)
        for manager, count in per_manager.items():
            repeats = count - routed.get((cluster, manager), 0) - extra_writes
            if repeats > 0:
                out[(manager, runtime_ids[cluster])] = repeats
    return out
