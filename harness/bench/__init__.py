"""Benchmarks that print numbers and write them to ``docs/`` (never timed unit tests)."""
