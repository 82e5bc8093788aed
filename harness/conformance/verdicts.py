"""One conformance check's outcome and the verdict over all of them. Pure."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum


class Verdict(StrEnum):
    IDENTICAL = "identical"
    """Behaves as upstream's does."""
    DOCUMENTED = "documented choice"
    """Behaves as our implementation documents instead (a better answer, with why)."""
    DIFFERS = "differs"
    """Neither: a wire incompatibility."""


@dataclass(frozen=True)
class CheckResult:
    area: str
    """``admission``, ``kcp request``, ``tls``, ``metrics``, ``listener``, ..."""
    check: str
    upstream: str
    """What upstream's component does (the reference)."""
    actual: str
    """What the implementation under test did."""
    verdict: Verdict
    why: str = ""
    """For a documented choice: the reason and where it is documented."""


@dataclass(frozen=True)
class Expectation:
    """Upstream's value and, optionally, our documented alternative to it."""

    upstream: str
    documented: str | None = None
    why: str = ""

    def judge(self, area: str, check: str, actual: str) -> CheckResult:
        if actual == self.upstream:
            return CheckResult(area, check, self.upstream, actual, Verdict.IDENTICAL)
        if self.documented is not None and actual == self.documented:
            return CheckResult(area, check, self.upstream, actual, Verdict.DOCUMENTED, self.why)
        return CheckResult(area, check, self.upstream, actual, Verdict.DIFFERS)


def passed(results: Iterable[CheckResult]) -> bool:
    """Conformant when nothing differs (documented choices are conformant)."""
    return all(r.verdict is not Verdict.DIFFERS for r in results)


def counts(results: Iterable[CheckResult]) -> dict[Verdict, int]:
    out = dict.fromkeys(Verdict, 0)
    for r in results:
        out[r.verdict] += 1
    return out
