"""Verify hooks: operator-supplied checks run on every event that passed the HTTP checks.

Interface: a hook is ``async def hook(request: VerifyRequest) -> None``. It passes by
returning and refuses by raising ``VerificationFailed(reason, category=...)``; the
listener answers 403 with that reason and counts the category. Any other exception is a
failure of the hook itself (e.g. the KCP API server is unreachable): the listener answers
500 so the SKR retries, and logs it. One request object rather than positional arguments
lets fields be added later without breaking hooks.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from cryptography import x509

from watcher.listener.errors import VerificationFailed
from watcher.model import Contract, WatchEvent

__all__ = ["Rejection", "RejectionObserver", "VerificationFailed", "VerifyHook", "VerifyRequest"]


@dataclass(frozen=True)
class VerifyRequest:
    """What a hook may look at: who sent which event, with which certificate."""

    runtime_id: str
    event: WatchEvent
    certificate: x509.Certificate = field(repr=False)
    contract: Contract = "v2"
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)


VerifyHook = Callable[[VerifyRequest], Awaitable[None]]


@dataclass(frozen=True)
class Rejection:
    """An event refused after its sender was identified: which runtime, the HTTP status,
    why (``category``: the verify hook's category such as ``san-mismatch``, else the
    listener's rejection reason) and the text the SKR was told. Refusals before the
    client certificate was read name no runtime and are not reported: an unidentified
    claim must not count against a runtime."""

    runtime_id: str
    status: int
    category: str
    reason: str


RejectionObserver = Callable[[Rejection], None]
"""Called for every :class:`Rejection` (e.g. watcher health: a refused heartbeat echo)."""
