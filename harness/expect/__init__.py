"""Expect: pure assertion engine — received WatchEvents against the ground truth
(``match``), counts, latency bounds and metric comparisons (``checks``)."""
