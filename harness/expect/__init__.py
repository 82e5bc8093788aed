"""Judges: each expectation kind judged against one
:class:`~harness.expect.observations.Observations` snapshot, as a pure function — events,
reconciles, rejections and metrics (``counts``), the churn's ground truth, latency and
write round trips (``churned``), ``assert``/``error`` (``assertion``), ``script``."""
