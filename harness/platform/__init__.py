"""What a real KCP or SKR cluster runs besides its API server, played on this host for a
Lifecycle Manager that expects it: cert-manager (``cert_manager``), the kubelet and
endpoint-slice controller for the SKR webhook (``kubelet``), Istio's ingress
(``harness.kcp.gateway``)."""
