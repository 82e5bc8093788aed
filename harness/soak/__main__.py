"""``python -m harness.soak``: see :mod:`harness.soak.cli`."""

from harness.soak.cli import main

raise SystemExit(main())
