"""Judges: each expectation kind judged against one
:class:`~harness.expect.observations.Observations` snapshot by pure code — ``judge``
(dispatching, and the counting kinds), ``truth``, ``reconciles``, ``latency``, ``writes``,
``timeline``, ``assertion`` (``assert``/``error``) and ``script``."""
