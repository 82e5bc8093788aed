"""The ``watcher-harness`` console script: checks for the harness extra, then runs the CLI.

The product installs without the harness's dependencies (``pip install
kyma-watcher-harness``); the script is installed all the same. Run there, it says what
to install instead of failing with an ImportError traceback.
"""

from __future__ import annotations

import importlib.util
import sys

HARNESS_MODULES = ("rich", "kubernetes_asyncio", "faker", "jmespath", "matplotlib")
INSTALL_HINT = "pip install 'kyma-watcher-harness[harness]'"


def missing_modules() -> list[str]:
    """The harness dependencies this interpreter cannot import."""
    return [name for name in HARNESS_MODULES if importlib.util.find_spec(name) is None]


def main(argv: list[str] | None = None) -> int:
    missing = missing_modules()
    if missing:
        print(
            f"watcher-harness: this installation has the product only; the harness also "
            f"needs {', '.join(missing)}: {INSTALL_HINT}",
            file=sys.stderr,
        )
        return 2
    from harness.cli import main as cli_main

    return cli_main(argv)
