"""Benchmarks: measured latency, throughput, scale and requeue savings (``make bench``).

One module per benchmark (``admission``, ``e2e``, ``throughput``, ``scale``, ``requeue``,
``cost``), a shared result model (``model``) and pure writers (``writer``); ``suite`` runs
them and writes ``docs/benchmarks.md``/``.json`` and plots. ``loopback`` is the older
webhook ↔ listener benchmark without API servers.
"""
