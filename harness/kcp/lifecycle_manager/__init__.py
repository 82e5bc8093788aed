"""Kyma's Lifecycle Manager (KLM) on the KCP, laid out as KLM keeps its controllers.

``manager`` — the Kyma controller's triggers (startup, creation, changes, watch events
from ``events``, requeue timers) over the work ``queue``; ``kyma`` — one Kyma reconcile
(SKR access, Kyma sync, catalog, Manifests, status) and the Kyma cache;
``manifest_controller`` — Manifests become Ready; ``watcher_controller`` — Watcher CRs
→ VirtualServices; ``skr_webhook`` with ``certificates`` — the Runtime Watcher deployed
into each SKR, the CA and per-Kyma certificates; ``metrics`` — KLM's own metrics."""
