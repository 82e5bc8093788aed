"""The KCP side: Istio's ingress ``gateway`` beside the ``lifecycle_manager`` (KLM).

Configuration flows from KLM's controllers to the gateway (Watchers → VirtualServices →
routes; the CA → the gateway Secret → its credential) and into the SKRs (the Runtime
Watcher per Kyma); events flow from the gateway to KLM's listener and its Kyma queue."""
