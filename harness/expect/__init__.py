"""Judges: each expectation kind judged against one
:class:`~harness.expect.observations.Observations` snapshot by a pure module of its own —
``events``, ``truth``, ``reconciles``, ``rejections``, ``metrics``, ``latency``, ``writes``,
``timeline`` (dispatched by ``judge``), ``assertion`` (``assert``/``error``) and ``script``."""
