"""Fault targets and actions: the typed vocabulary a scenario's ``fault`` step and the
environment share.

Pure. The scenario model turns a ``fault`` step into a :class:`Fault` when the file is
loaded (so a bad target is a located error), the runner hands that value to the session,
and the environment carries it out (:mod:`harness.environment.inject`) after checking the
names against what runs. ``parse_fault`` checks a ``(target, action)`` pair against
:data:`ACTIONS` and says what is allowed when it is not. Targets:

* ``gateway`` — stop / start / kill / restart the Envoy gateway (same ports);
* ``webhook/<skr>`` — stop / start / kill / restart that SKR's webhook process;
* ``listener/<component>`` — stop / start / restart a manager's listener (same port);
* ``apiserver/<cluster>`` — stop / start / kill / restart a kube-apiserver (``kcp`` or an
  SKR; same port, certificates and etcd data);
* ``kcp`` — ``delay`` / ``abort`` / ``clear``: latency or errors injected by Envoy on
  every route to the KCP (parameters: ``delay_ms``, ``percent``, ``status``);
* ``certificates`` — ``rotate-leaf`` (parameter ``skrs``), ``rotate-ca``, ``drop-old-ca``,
  ``break-leaf`` (parameters ``skrs`` and ``override``: a deliberately broken certificate
  issued and kept until the next ``rotate-leaf`` of that SKR).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from harness.errors import HarnessError

ACTIONS: Mapping[str, tuple[str, ...]] = {
    "gateway": ("stop", "start", "kill", "restart"),
    "webhook": ("stop", "start", "kill", "restart"),
    "listener": ("stop", "start", "restart"),
    "apiserver": ("stop", "start", "kill", "restart"),
    "kcp": ("delay", "abort", "clear"),
    "certificates": ("rotate-leaf", "rotate-ca", "drop-old-ca", "break-leaf"),
}
NAMED = frozenset({"webhook", "listener", "apiserver"})
"""Targets that name a part: ``<kind>/<name>``."""


class FaultError(HarnessError, ValueError):
    """An unknown fault target or action, or one that does not fit the environment."""


@dataclass(frozen=True)
class Fault:
    """A checked fault: what kind of part, which one (``""`` for singletons), what to do,
    and the action's parameters (``skrs`` for ``rotate-leaf``; ``delay_ms``, ``percent``,
    ``status`` for ``kcp``) as sorted pairs, so the value stays hashable."""

    kind: str
    name: str
    action: str
    params: tuple[tuple[str, Any], ...] = ()

    @property
    def target(self) -> str:
        return f"{self.kind}/{self.name}" if self.name else self.kind

    @property
    def parameters(self) -> dict[str, Any]:
        return dict(self.params)

    def check_names(self, names: Mapping[str, frozenset[str]]) -> None:
        """Raise :class:`FaultError` unless the named part is one of ``names[kind]``."""
        known = names.get(self.kind)
        if known is not None and self.name not in known:
            listed = ", ".join(sorted(known)) or "none"
            raise FaultError(
                f"no {self.kind} named {self.name!r} in this environment (have: {listed})"
            )


def parse_fault(
    target: str,
    action: str,
    names: Mapping[str, frozenset[str]] | None = None,
    params: Mapping[str, Any] | None = None,
) -> Fault:
    """``("webhook/skr-a", "kill")`` → ``Fault("webhook", "skr-a", "kill")``.

    ``names`` (kind → known names), when given, is checked too, so a typo in an SKR or
    component name fails before anything is touched.
    """
    kind, slash, name = target.partition("/")
    if kind not in ACTIONS:
        raise FaultError(
            f"unknown fault target {target!r}; use one of: gateway, kcp, certificates, "
            "webhook/<skr>, listener/<component>, apiserver/<cluster>"
        )
    if kind in NAMED and not name:
        raise FaultError(f"fault target {target!r} needs a name: {kind}/<name>")
    if kind not in NAMED and slash:
        raise FaultError(f"fault target {kind!r} takes no name (got {target!r})")
    if action not in ACTIONS[kind]:
        raise FaultError(
            f"unknown action {action!r} for {target!r}; use one of: {', '.join(ACTIONS[kind])}"
        )
    fault = Fault(kind, name, action, tuple(sorted((params or {}).items())))
    fault.check_names(names or {})
    return fault
