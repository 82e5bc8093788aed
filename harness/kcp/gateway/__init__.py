"""Istio's ingress gateway on the KCP: a real Envoy (``envoy``, driven through files and
its admin endpoint), fed like Istio feeds it — routes from VirtualServices (``routes``),
its credential from the gateway Secret (``credential``) — and the mesh mTLS towards the
listeners behind it (``mesh``)."""
