"""The judges' common result: one :class:`Check` per expectation entry."""

from __future__ import annotations

from dataclasses import dataclass

from harness.expect.checks import CountBound, Verdict, count_verdict


@dataclass(frozen=True)
class Check:
    """The verdict (expected vs actual text), whether waiting can still change it
    (``final``: a count already above its upper bound only grows) and whether it has an
    upper bound a late arrival could break (``bounded``: checked once more after a short
    grace period). ``details`` is multi-line text for the report (a diff, an output);
    ``attachments`` are (name, text) pairs such as the selected objects' YAML."""

    kind: str
    description: str
    verdict: Verdict
    final: bool = False
    bounded: bool = False
    latencies: tuple[float, ...] = ()  # seconds, for the report's histogram
    details: str = ""
    attachments: tuple[tuple[str, str], ...] = ()

    @property
    def ok(self) -> bool:
        return self.verdict.ok


def counted(kind: str, description: str, count: int, bound: CountBound, noun: str) -> Check:
    """A count against its bound; final once it is above the upper bound."""
    verdict = count_verdict(count, bound, description, noun=noun)
    above = bound.at_most is not None and count > bound.at_most
    return Check(kind, description, verdict, final=above, bounded=bound.at_most is not None)


def combined(kind: str, description: str, verdicts: list[Verdict], *, suffix: str = "") -> Check:
    """Several bounds on one subject as one check (every verdict must hold)."""
    verdict = Verdict(
        all(v.ok for v in verdicts),
        "; ".join(v.text for v in verdicts),
        "; ".join(v.expected for v in verdicts),
        "; ".join(v.actual for v in verdicts) + suffix,
    )
    return Check(kind, description, verdict)
