"""The kubelet, deployment and endpoint-slice controllers and kube-proxy of a bare
kube-apiserver SKR, so that the SKR webhook Deployment a Lifecycle Manager applies runs
and the API server reaches it through its Service: :mod:`.pods` and :mod:`.status` decide
(pure), :mod:`.node`, :mod:`.container` and :mod:`.proxy` act, :mod:`.controller` wires."""

from harness.platform.kubelet.container import PodRecord
from harness.platform.kubelet.controller import Kubelet, KubeletError
from harness.platform.kubelet.status import MANAGED_BY

DIFFERENCES = (
    "No Pod or ReplicaSet objects: pods live in the Kubelet (Kubelet.pods); kubectl get "
    "pods, logs, exec and the API server's pod proxy do not reach them.",
    "A pod is a host process (the caller's command for its image) in a network namespace "
    "with only loopback: container ports are published on fresh host ports of 127.0.0.1 at "
    "each start, only KCP_ADDR is reachable outside; no DNS, service variables or token; "
    "status.podIP (10.244.0.0/16) is configured nowhere. No mount namespace: env values and "
    "args under a volumeMount are rewritten to the pod's directory (its working directory).",
    "Supported: one container, args, env values and fieldRef metadata.name, "
    "metadata.namespace, status.podIP, secret and emptyDir (disk) volumes, TCP ports, a "
    "tcpSocket or httpGet readinessProbe (initialDelaySeconds ignored), "
    "terminationGracePeriodSeconds. Ignored: "
    "livenessProbe, startupProbe, resources, securityContext, priorityClassName, strategy, "
    "NetworkPolicies, PriorityClasses. Other volumes, subPath, secretKeyRef, envFrom, a "
    "command, initContainers, exec probes make the pod unrunnable.",
    "Without a readinessProbe a pod is ready once its first port accepts (a kubelet: once "
    "started); probes run inside the pod's namespace at 127.0.0.1.",
    "Why a pod cannot run shows on the Deployment as ReplicaFailure/FailedCreate (a cluster "
    "shows it on the Pod only).",
    "One pod per Deployment (ReplicaFailure says so for more replicas). A new template's pod "
    "replaces the old one once it is routed; the old one is stopped once kube-proxy sends "
    "it nothing another pod could take (no surge arithmetic, minReadySeconds, deadline).",
    "Crash-loop back-off: immediate, then 1 s doubling to 10 s, reset after 20 s (a "
    "kubelet: 10 s to 5 min, reset after 10 min).",
    f"One EndpointSlice per Service, <service>-<hash>, managed by {MANAGED_BY}; pods listed "
    "from creation; none when no pod is selected (the controller keeps an empty one).",
    "kube-proxy is a user-space TCP proxy on <ClusterIP>:<port> (loopback ClusterIPs: "
    "loopback_service_range); --enable-aggregator-routing must stay off.",
    "Kubelet.wait_ready returns once the pod is ready and routed through its Services.",
    "pod-template-hash hashes the template's JSON, not Go's struct dump: names differ.",
    "A missing Secret keeps the pod in ContainerCreating; a Secret's change reaches its "
    "files within milliseconds (a kubelet: up to a minute).",
    "Leaving the Kubelet stops its pods and deletes its slices; one Kubelet per cluster.",
)
"""Every place where this emulation differs from a real node (for the documentation)."""

__all__ = ["DIFFERENCES", "Kubelet", "KubeletError", "PodRecord"]
