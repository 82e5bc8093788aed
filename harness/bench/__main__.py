"""``python -m harness.bench``: the benchmark suite (see :mod:`harness.bench.suite`)."""

from harness.bench.suite import main

raise SystemExit(main())
