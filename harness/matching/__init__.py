"""Matching observed data against what a scenario writes down: partial object trees
(``assert``/``error``, ``script`` JSON output) and command output. Pure, no harness
imports: the scenario model validates with it, the judges in :mod:`harness.expect` use it."""
