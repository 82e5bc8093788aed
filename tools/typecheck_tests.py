"""Type-check every test file with mypy, as strictly as the product (``[tool.mypy]``).

``mypy tests`` cannot work: tests/ is deliberately not a package (``tests/harness`` would
shadow the real ``harness``, see the root conftest.py), so pytest imports each test
module by its bare name from its own directory (``from runner_fake import ...``), and
mypy, given file paths, names each file after its stem too. Those stems are unique except
``conftest`` (one per directory), and mypy refuses two modules of one name in one run
("Duplicate module named 'conftest'"). ``--explicit-package-bases`` does not help: it
names files after their path (``tests.harness.runner.runner_fake``), and then the
bare-name imports between test files no longer resolve.

So this script names the modules itself and runs mypy once, with ``-m`` per module:

* every test module and helper by its stem, as pytest imports it, found through MYPYPATH,
  which lists every directory under tests/ that holds Python files;
* each conftest.py by its dotted path (``tests.harness.kcp.conftest``; the root one is
  ``conftest``), found from the repository root, which MYPYPATH lists first.

Every ``*.py`` under tests/ is picked up, new ones included. Two test modules of one
stem are refused up front: mypy would check only one, and pytest would import only one.
The cache is ``.mypy_cache/tests``; the exit status is mypy's.

    .venv/bin/python tools/typecheck_tests.py [--workers N] [--list]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
CACHE = ROOT / ".mypy_cache" / "tests"
CONFTEST = "conftest"


def test_files() -> list[Path]:
    """The root conftest.py and every ``*.py`` below tests/ (no hidden dirs, no caches)."""
    found = [ROOT / "conftest.py"] if (ROOT / "conftest.py").is_file() else []
    for directory, subdirs, names in os.walk(TESTS):
        subdirs[:] = sorted(d for d in subdirs if not d.startswith((".", "__pycache__")))
        found += [Path(directory, n) for n in sorted(names) if n.endswith(".py")]
    return found


def module_name(path: Path) -> str:
    """How the run names a file: conftests by dotted path, everything else by stem."""
    if path.stem == CONFTEST:
        return ".".join(path.relative_to(ROOT).with_suffix("").parts)
    return path.stem


def problems(files: list[Path]) -> list[str]:
    """Files this run could not name unambiguously (each would go unchecked)."""
    found = []
    by_name: dict[str, list[Path]] = defaultdict(list)
    for f in files:
        name = module_name(f)
        by_name[name].append(f)
        if not all(part.isidentifier() for part in name.split(".")):
            found.append(f"{f.relative_to(ROOT)}: {name!r} is not an importable module name")
        elif f.stem != CONFTEST and (
            (ROOT / f"{name}.py").exists() or (ROOT / name / "__init__.py").exists()
        ):
            found.append(f"{f.relative_to(ROOT)}: {name!r} is also a module at the repo root")
    for name, same in sorted(by_name.items()):
        if len(same) > 1:
            where = ", ".join(str(f.relative_to(ROOT)) for f in same)
            found.append(f"module name {name!r} is used more than once: {where}")
    return found


def mypy_supports_workers() -> bool:
    try:
        from mypy.version import __version__
    except ImportError:
        return False
    return int(__version__.split(".")[0]) >= 2


def main() -> int:
    parser = argparse.ArgumentParser(description="Type-check tests/ with mypy (strict).")
    parser.add_argument(
        "--workers",
        type=int,
        default=min(os.cpu_count() or 1, 2) if mypy_supports_workers() else 0,
        help="mypy --num-workers (0: in one process; default: 2 on mypy >= 2)",
    )
    parser.add_argument("--list", action="store_true", help="print file -> module and exit")
    args = parser.parse_args()

    files = test_files()
    trouble = problems(files)
    if trouble:
        for line in trouble:
            print(f"typecheck_tests: {line}", file=sys.stderr)
        print(
            "typecheck_tests: rename the files above (tests import each other by bare name)",
            file=sys.stderr,
        )
        return 2
    if args.list:
        for f in files:
            print(f"{f.relative_to(ROOT)} -> {module_name(f)}")
        return 0

    # The repo root first: it resolves ``conftest`` and ``tests.….conftest``. Then every
    # directory holding test modules, as pytest puts each on sys.path.
    dirs = dict.fromkeys([".", *(str(f.parent.relative_to(ROOT)) for f in files)])
    env = dict(os.environ, MYPYPATH=os.pathsep.join(dirs))
    cmd = [sys.executable, "-m", "mypy", "--cache-dir", str(CACHE.relative_to(ROOT))]
    if args.workers > 1:
        cmd += ["--num-workers", str(args.workers)]
    for f in files:
        cmd += ["-m", module_name(f)]
    return subprocess.run(cmd, cwd=ROOT, env=env, check=False).returncode


if __name__ == "__main__":
    sys.exit(main())
