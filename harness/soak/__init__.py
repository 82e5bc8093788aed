"""Soak: minutes of churn at a steady write rate across SKRs, checked by the ground-truth
oracle, with the memory and file descriptors of every watcher process sampled over time.

``model`` (pure: samples, windows, growth, pass/fail), ``sampler`` (reads ``/proc``),
``config`` (a run's knobs, churn and Watchers), ``run`` (environment, churn, sampling,
oracle; the second manager's listener is a :class:`~harness.kcp.listener_process
.ListenerProcess`), ``result`` (what a run found, as JSON), ``report`` and ``plot`` (pure
writers), ``cli`` (``make soak``).
"""
