"""Which cluster backend a run uses, and where its clusters are: chosen outside the scenario.

Pure. A scenario file may say ``backend: ...``; the environment (``WATCHER_HARNESS_*``
variables) overrides the file, and a command-line option (:data:`BACKEND_FLAGS`:
``watcher-harness run --backend``, ``pytest --cluster-backend``, ...) overrides both — so
the same file runs unchanged on every backend. Variables (README.md has the details):

* ``WATCHER_HARNESS_BACKEND`` — ``local`` (default), ``kubeconfig`` or ``kind``;
* ``WATCHER_HARNESS_KUBECONFIG`` (``:``-separated; default ``$KUBECONFIG``, then
  ``~/.kube/config``) and ``WATCHER_HARNESS_CONTEXTS`` (``kcp=ctx-a,skr-a=ctx-b``; default:
  the context named like the cluster) — where the ``kubeconfig`` backend's clusters are;
* ``WATCHER_HARNESS_RUN_ID`` — the run id put on everything the run creates (default: new);
* ``WATCHER_HARNESS_HOST_ADDRESS`` — how the API servers reach this host (default
  ``127.0.0.1``; kind: its network's gateway); ``WATCHER_HARNESS_HOST_BIND`` — what the
  host-run webhook binds (default: that address, ``0.0.0.0`` for a DNS name);
* ``WATCHER_HARNESS_WEBHOOK_MODE`` — ``host`` (default) or ``in-cluster``
  (``harness.skr.in_cluster``); ``WATCHER_HARNESS_WEBHOOK_COMMAND`` — bring your own
  webhook, run in a network namespace of its own (``harness.skr.isolate``) unless
  ``WATCHER_HARNESS_WEBHOOK_ISOLATION=none``;
* ``WATCHER_HARNESS_KLM_COMMAND``, ``WATCHER_HARNESS_KLM_CRDS``,
  ``WATCHER_HARNESS_KLM_FEATURES`` — bring your own Lifecycle Manager
  (``harness.environment.any_klm``, docs/any-klm.md).
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

from harness.errors import ClusterError
from harness.scenario.requirements import KLM_FEATURES

BackendName = Literal["local", "kubeconfig", "kind"]
BACKENDS: tuple[BackendName, ...] = ("local", "kubeconfig", "kind")
ENV_BACKEND = "WATCHER_HARNESS_BACKEND"
ENV_KUBECONFIG = "WATCHER_HARNESS_KUBECONFIG"
ENV_CONTEXTS = "WATCHER_HARNESS_CONTEXTS"
ENV_RUN_ID = "WATCHER_HARNESS_RUN_ID"
ENV_HOST_ADDRESS = "WATCHER_HARNESS_HOST_ADDRESS"
ENV_HOST_BIND = "WATCHER_HARNESS_HOST_BIND"
ENV_WEBHOOK_MODE = "WATCHER_HARNESS_WEBHOOK_MODE"
WebhookMode = Literal["host", "in-cluster"]
WEBHOOK_MODES: tuple[WebhookMode, ...] = ("host", "in-cluster")
ENV_WEBHOOK_COMMAND = "WATCHER_HARNESS_WEBHOOK_COMMAND"
ENV_WEBHOOK_ISOLATION = "WATCHER_HARNESS_WEBHOOK_ISOLATION"
ENV_KLM_COMMAND = "WATCHER_HARNESS_KLM_COMMAND"
ENV_KLM_CRDS = "WATCHER_HARNESS_KLM_CRDS"
ENV_KLM_FEATURES = "WATCHER_HARNESS_KLM_FEATURES"
WebhookIsolation = Literal["netns", "none"]
WEBHOOK_ISOLATIONS: tuple[WebhookIsolation, ...] = ("netns", "none")
_Choice = TypeVar("_Choice", bound=str)


class BackendSelectionError(ClusterError, ValueError):
    """An unknown backend name or a malformed context list."""


@dataclass(frozen=True)
class ClusterTarget:
    """Where one cluster of the ``kubeconfig`` backend is: files to look in, a context."""

    kubeconfigs: tuple[Path, ...]
    context: str


@dataclass(frozen=True)
class BackendChoice:
    """The backend of a run; for ``kubeconfig``, the file and the context of each cluster."""

    name: BackendName = "local"
    kubeconfigs: tuple[Path, ...] = ()
    contexts: Mapping[str, str] = field(default_factory=dict)
    run_id: str | None = None
    host_address: str | None = None
    """How API servers reach this host (None: the backend's default, else 127.0.0.1)."""
    host_bind: str | None = None
    """What the host-run webhook binds (None: the host address if it is an IP, else 0.0.0.0)."""
    webhook_mode: WebhookMode = "host"
    webhook_command: tuple[str, ...] = ()
    """Bring your own webhook: the argv run instead of ``watcher-webhook`` (() = ours)."""
    webhook_isolation: WebhookIsolation = "netns"
    klm_command: tuple[str, ...] = ()
    """Bring your own Lifecycle Manager: its argv (() = the harness's own, in process)."""
    klm_crds: Path | None = None
    """That KLM's CRD folder (None: the harness's fixtures)."""
    klm_features: tuple[str, ...] = ()
    """What that KLM shows beyond upstream's (``harness.scenario.requirements.KLM_FEATURES``)."""

    def target(self, cluster: str) -> ClusterTarget:
        """Cluster ``cluster``'s files and context (default: the context named ``cluster``)."""
        if not self.kubeconfigs:
            raise BackendSelectionError(
                f"backend {self.name}: no kubeconfig for cluster {cluster!r}; set "
                f"{ENV_KUBECONFIG} or pass --kubeconfig"
            )
        return ClusterTarget(self.kubeconfigs, self.contexts.get(cluster, cluster))


@dataclass(frozen=True)
class BackendOverride:
    """What a command line says (None: not given, the environment or the file decides)."""

    name: str | None = None
    kubeconfig: str | None = None  # ":"-separated files
    contexts: str | None = None
    host_address: str | None = None
    webhook_mode: str | None = None
    webhook_command: str | None = None  # a command line, split like a shell's words
    klm_command: str | None = None  # likewise
    klm_crds: str | None = None
    klm_features: str | None = None  # comma-separated


@dataclass(frozen=True)
class BackendFlag:
    """A command-line option setting one :class:`BackendOverride` field, as
    ``watcher-harness run`` (``flag``) and pytest (``pytest_flag``) name it."""

    field: str
    flag: str
    pytest_flag: str
    help: str
    metavar: str | None = None
    choices: tuple[str, ...] | None = None

    @property
    def dest(self) -> str:
        """Where argparse keeps the value of ``flag``."""
        return self.flag.removeprefix("--").replace("-", "_")


BACKEND_FLAGS: tuple[BackendFlag, ...] = (
    BackendFlag(
        "name",
        "--backend",
        "--cluster-backend",
        "cluster backend for every scenario (default: WATCHER_HARNESS_BACKEND, else the "
        "file's backend, else local)",
        choices=BACKENDS,
    ),
    BackendFlag(
        "kubeconfig",
        "--kubeconfig",
        "--cluster-kubeconfig",
        "kubeconfig backend: files holding the clusters' contexts "
        "(default: WATCHER_HARNESS_KUBECONFIG, KUBECONFIG, ~/.kube/config)",
        metavar="FILE[:FILE]",
    ),
    BackendFlag(
        "contexts",
        "--context",
        "--cluster-contexts",
        "kubeconfig backend: context per cluster (default: the context named like it)",
        metavar="kcp=CTX,skr-a=CTX",
    ),
    BackendFlag(
        "host_address",
        "--host-address",
        "--cluster-host-address",
        "address the API servers (and in-cluster webhooks) use to reach this host "
        "(default: WATCHER_HARNESS_HOST_ADDRESS, kind: its network's gateway, else 127.0.0.1)",
        metavar="ADDRESS",
    ),
    BackendFlag(
        "webhook_mode",
        "--webhook",
        "--cluster-webhook",
        "where the SKR webhook runs (default: WATCHER_HARNESS_WEBHOOK_MODE, else host)",
        choices=WEBHOOK_MODES,
    ),
    BackendFlag(
        "webhook_command",
        "--webhook-command",
        "--webhook-command",
        "bring your own webhook: a command line taking upstream's environment contract "
        "(WEBHOOK_PORT, METRICS_PORT, CA_CERT, TLS_CERT, TLS_KEY, KCP_ADDR, KCP_CONTRACT), "
        "run as every SKR's webhook in a network namespace of its own (default: "
        "WATCHER_HARNESS_WEBHOOK_COMMAND, else ours); scenarios that need our webhook's own "
        "features are skipped with the reason",
        metavar="COMMAND",
    ),
    BackendFlag(
        "klm_command",
        "--klm-command",
        "--klm-command",
        "bring your own Lifecycle Manager: a command line taking KLM's flags, run as "
        "the KCP's KLM, the harness playing cert-manager, each SKR's kubelet and Istio's "
        "ingress (default: WATCHER_HARNESS_KLM_COMMAND, else ours in the harness's "
        "process); scenarios needing what that KLM does not show are skipped with the reason",
        metavar="COMMAND",
    ),
    BackendFlag(
        "klm_crds",
        "--klm-crds",
        "--klm-crds",
        "that KLM's CRDs (default: WATCHER_HARNESS_KLM_CRDS, else the harness's own)",
        metavar="DIR",
    ),
    BackendFlag(
        "klm_features",
        "--klm-features",
        "--klm-features",
        "what that KLM shows beyond upstream's, comma-separated (default: "
        "WATCHER_HARNESS_KLM_FEATURES; see docs/any-klm.md)",
        metavar="LIST",
    ),
)
"""The options of ``watcher-harness run`` and of pytest that override the backend."""


def override_from(given: Callable[[BackendFlag], str | None]) -> BackendOverride:
    """What the command line says, ``given`` reading each option (None: not given)."""
    return BackendOverride(**{flag.field: given(flag) for flag in BACKEND_FLAGS})


def _one_of(value: str, known: tuple[_Choice, ...], what: str, source: str) -> _Choice:
    """``value`` as the literal it names (its type narrowed), else an error naming ``source``."""
    for choice in known:
        if value == choice:
            return choice
    raise BackendSelectionError(
        f"{source}: unknown {what} {value!r}; use one of: {', '.join(known)}"
    )


def webhook_mode(value: str, source: str) -> WebhookMode:
    return _one_of(value, WEBHOOK_MODES, "webhook mode", source)


def _given(given: str | None, flag: str, env: Mapping[str, str], name: str) -> tuple[str, str]:
    """The command line's ``flag`` if given, else variable ``name``: its text and source."""
    if given is not None:
        return given, flag
    return env.get(name, ""), name


def _command(text: str, source: str) -> tuple[str, ...]:
    """A bring-your-own command line, split like a shell's words."""
    try:
        return tuple(shlex.split(text))
    except ValueError as exc:
        raise BackendSelectionError(f"{source}: {text!r} is not a command line: {exc}") from None


def _host_options(override: BackendOverride, env: Mapping[str, str]) -> dict[str, Any]:
    """Host address, bind address and webhook mode: command line over environment."""
    mode: WebhookMode = "host"
    if override.webhook_mode:
        mode = webhook_mode(override.webhook_mode, "--webhook")
    elif env.get(ENV_WEBHOOK_MODE):
        mode = webhook_mode(env[ENV_WEBHOOK_MODE], ENV_WEBHOOK_MODE)
    address = (override.host_address or env.get(ENV_HOST_ADDRESS) or "").strip() or None
    if address is not None and (any(c in address for c in "/ :@") or address.startswith("[")):
        raise BackendSelectionError(
            f"host address {address!r}: give an IPv4 address or a DNS name, without port"
        )
    return {
        "host_address": address,
        "host_bind": env.get(ENV_HOST_BIND, "").strip() or None,
        "webhook_mode": mode,
        **_webhook_command(override, env, mode),
        **_klm_command(override, env),
    }


def _klm_command(override: BackendOverride, env: Mapping[str, str]) -> dict[str, Any]:
    """The bring-your-own KLM command and its CRD folder (command line over environment)."""
    command = _command(*_given(override.klm_command, "--klm-command", env, ENV_KLM_COMMAND))
    crds_text = override.klm_crds or env.get(ENV_KLM_CRDS, "").strip()
    crds = Path(crds_text).expanduser() if crds_text else None
    if crds is not None and not crds.is_dir():
        raise BackendSelectionError(f"KLM CRDs: {crds} is not a folder")
    features_text, _ = _given(override.klm_features, "--klm-features", env, ENV_KLM_FEATURES)
    features = tuple(f.strip() for f in features_text.split(",") if f.strip())
    unknown = sorted(set(features) - set(KLM_FEATURES))
    if unknown:
        raise BackendSelectionError(
            f"KLM features: unknown {', '.join(unknown)}; known: {', '.join(KLM_FEATURES)}"
        )
    return {"klm_command": command, "klm_crds": crds, "klm_features": features}


def _webhook_command(
    override: BackendOverride, env: Mapping[str, str], mode: WebhookMode
) -> dict[str, Any]:
    """The bring-your-own webhook command (command line over environment) and isolation."""
    text, source = _given(override.webhook_command, "--webhook-command", env, ENV_WEBHOOK_COMMAND)
    command = _command(text, source)
    if command and mode != "host":
        raise BackendSelectionError(
            f"{source}: a webhook command runs on this host; it cannot be combined with "
            "webhook mode in-cluster (which runs the image in the SKR)"
        )
    return {"webhook_command": command, "webhook_isolation": webhook_isolation(env)}


def webhook_isolation(env: Mapping[str, str]) -> WebhookIsolation:
    """``WATCHER_HARNESS_WEBHOOK_ISOLATION`` (default ``netns``)."""
    isolation = env.get(ENV_WEBHOOK_ISOLATION, "netns").strip() or "netns"
    return _one_of(isolation, WEBHOOK_ISOLATIONS, "isolation", ENV_WEBHOOK_ISOLATION)


def backend_name(value: str, source: str) -> BackendName:
    return _one_of(value, BACKENDS, "cluster backend", source)


def parse_contexts(text: str, source: str) -> dict[str, str]:
    """``kcp=ctx-a,skr-a=admin@dev`` → context by cluster name (contexts may hold ``@:/``)."""
    contexts: dict[str, str] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        name, eq, context = part.partition("=")
        if not eq or not name.strip() or not context.strip():
            raise BackendSelectionError(f"{source}: {part!r} is not CLUSTER=CONTEXT")
        contexts[name.strip()] = context.strip()
    return contexts


def split_paths(text: str) -> tuple[Path, ...]:
    return tuple(Path(p).expanduser() for p in text.split(os.pathsep) if p.strip())


def _default_kubeconfigs(env: Mapping[str, str]) -> tuple[Path, ...]:
    return split_paths(env.get("KUBECONFIG") or "") or (Path("~/.kube/config").expanduser(),)


def choose_backend(
    file_backend: str = "local",
    *,
    override: BackendOverride | None = None,
    env: Mapping[str, str] | None = None,
) -> BackendChoice:
    """Command line over environment over the scenario file (see the module doc)."""
    env = os.environ if env is None else env
    override = override or BackendOverride()
    if override.name:
        name = backend_name(override.name, "--backend")
    elif env.get(ENV_BACKEND):
        name = backend_name(env[ENV_BACKEND], ENV_BACKEND)
    else:
        name = backend_name(file_backend, "scenario backend")
    host = _host_options(override, env)
    if name == "local" and host["webhook_mode"] != "host":
        raise BackendSelectionError(
            "webhook mode in-cluster needs the kubeconfig or kind backend (a local API server "
            "runs no pods)"
        )
    if name != "kubeconfig":
        return BackendChoice(name=name, run_id=env.get(ENV_RUN_ID) or None, **host)
    files = split_paths(override.kubeconfig or env.get(ENV_KUBECONFIG) or "")
    return BackendChoice(
        name=name,
        kubeconfigs=files or _default_kubeconfigs(env),
        contexts=parse_contexts(*_given(override.contexts, "--context", env, ENV_CONTEXTS)),
        run_id=env.get(ENV_RUN_ID) or None,
        **host,
    )
