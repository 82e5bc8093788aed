"""What the kubelet does on the node's filesystem and in a pod's network: write secret
volumes as its atomic writer does (an emptyDir is just made), and probe a container port
from inside the pod."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import datetime as dt
import http.client
import os
import shutil
import socket
import tempfile
from pathlib import Path

from harness.clusters import procfs
from harness.platform.kubelet.pods import Probe, Volume

CLONE_NEWNET = 0x40000000


def write_volume(volume: Volume) -> bool:
    """Write the files into a fresh ``..<timestamp>`` directory and swap the ``..data``
    link to it by one rename, so a reader never sees half a rotation; each file's name
    links into ``..data``. False when the content is unchanged (nothing written)."""
    directory, files = volume.directory, volume.files
    if volume.empty_dir:
        made = not directory.exists()
        directory.mkdir(parents=True, exist_ok=True)
        return made
    data = directory / "..data"
    with contextlib.suppress(OSError):
        now = {p.name: (p.read_bytes(), p.stat().st_mode & 0o777) for p in data.iterdir()}
        if now == {f.path: (f.data, f.mode) for f in files}:
            return False
    directory.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y_%m_%d_%H_%M_%S")
    fresh = Path(tempfile.mkdtemp(prefix=f"..{stamp}.", dir=directory))
    for file in files:
        (fresh / file.path).write_bytes(file.data)
        (fresh / file.path).chmod(file.mode)
    fresh.chmod(0o755)
    old = os.readlink(data) if data.is_symlink() else None
    (directory / "..data_tmp").unlink(missing_ok=True)
    os.symlink(fresh.name, directory / "..data_tmp")
    os.replace(directory / "..data_tmp", data)
    names = {f.path for f in files}
    for entry in directory.iterdir():
        if entry.is_symlink() and not entry.name.startswith("..") and entry.name not in names:
            entry.unlink()
    for name in names - {e.name for e in directory.iterdir()}:
        os.symlink(f"..data/{name}", directory / name)
    if old:
        shutil.rmtree(directory / old, ignore_errors=True)
    return True


def _namespace_fd(pgid: int) -> int | None:
    """A descriptor of the network namespace a member of process group ``pgid`` entered
    (the pod's); None while none has."""
    own = os.readlink("/proc/self/ns/net")
    for pid in procfs.group_members(pgid):
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/{pid}/ns/net") != own:
                return os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    return None


def _probe_in(pgid: int, probe: Probe) -> tuple[bool, str]:
    """One probe from a pooled thread that enters the pod's network namespace for it and
    returns to its own before it is reused (a namespace is per thread)."""
    pod = _namespace_fd(pgid)
    if pod is None:
        return False, "the pod's network namespace does not exist yet"
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    setns = ctypes.CDLL(None, use_errno=True).setns
    try:
        if setns(pod, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), "setns into the pod's network failed")
        try:
            return _probe_once(probe)
        finally:
            setns(own, CLONE_NEWNET)
    finally:
        os.close(own)
        os.close(pod)


def _probe_once(probe: Probe) -> tuple[bool, str]:
    where = f"127.0.0.1:{probe.port}"
    if probe.path is None:
        try:
            socket.create_connection(("127.0.0.1", probe.port), timeout=probe.timeout).close()
            return True, ""
        except OSError as exc:
            return False, f"dial tcp {where}: {exc.strerror or exc}"
    connection = http.client.HTTPConnection("127.0.0.1", probe.port, timeout=probe.timeout)
    try:
        connection.request("GET", probe.path)
        status = connection.getresponse().status
    except (OSError, http.client.HTTPException) as exc:
        return False, f"GET {where}{probe.path}: {exc}"
    finally:
        connection.close()
    return 200 <= status < 400, f"HTTP probe failed with statuscode: {status}"


async def probe(spec: Probe, pgid: int) -> tuple[bool, str]:
    """One probe of ``127.0.0.1:<port>`` in the network namespace of the pod whose process
    group is ``pgid``: (ok, why not)."""
    try:
        async with asyncio.timeout(spec.timeout + 1.0):
            return await asyncio.to_thread(_probe_in, pgid, spec)
    except TimeoutError:
        return False, f"timed out after {spec.timeout:g} s"
    except OSError as exc:
        return False, str(exc)
