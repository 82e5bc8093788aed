"""A Python Kyma Runtime Watcher, wire-compatible with the upstream Go components.

Modules in the order an event travels: ``model`` (AdmissionReview and WatchEvent
shapes) → ``decide`` (pure: admission → event) → ``webhook`` (HTTP + delivery to KCP) →
``listener`` (KCP side: XFCC → runtime id → verify hooks → event stream).
``render`` turns Watcher CRs into configuration; ``pki`` issues certificates.
"""

__version__ = "0.1.0"
