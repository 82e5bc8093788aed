"""Soak: minutes of churn at a steady write rate across SKRs, checked by the ground-truth
oracle, with the memory and file descriptors of every watcher process sampled over time.

``model`` (pure: samples, windows, growth, pass/fail), ``sampler`` (reads ``/proc``),
``external`` (a ``watcher-listener`` process behind the gateway), ``run`` (environment,
churn, sampling, oracle), ``report`` and ``plot`` (pure writers), ``cli`` (``make soak``).
"""
