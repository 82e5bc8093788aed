"""Wire-level conformance: does a webhook or a listener behave as upstream's does today?

``watcher-harness conformance --webhook-command CMD`` (or ``--listener-command CMD``) runs
the implementation on loopback against the checks of ``webhook.py`` / ``listener.py`` —
decisions over a table of AdmissionReviews, admission answers and headers, the exact KCP
request paths and bodies, mTLS and TLS 1.3, metric names, listener status codes — and
prints one table row per check: identical to upstream's, our documented choice (with
why), or differs. Upstream's behaviour is written down as literal test vectors
(``webhook_cases.py``, ``listener_cases.py``) taken from ``watcher-reference.md``, not
computed by our own code, so our implementation is checked like any other.
"""
