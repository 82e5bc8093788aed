"""Go's duration text (``time.ParseDuration``), as KLM's flags and cert-manager's specs
spell durations: ``2160h``, ``1h30m``, ``1.5s``, ``250ms``, ``0``. Pure."""

from __future__ import annotations

import datetime as dt
import re
from fractions import Fraction
from typing import Final

_UNITS: Final = {
    "ns": Fraction(1, 10**9),
    "us": Fraction(1, 10**6),
    "µs": Fraction(1, 10**6),  # U+00B5 micro sign
    "μs": Fraction(1, 10**6),  # U+03BC Greek mu; Go accepts both
    "ms": Fraction(1, 1000),
    "s": Fraction(1),
    "m": Fraction(60),
    "h": Fraction(3600),
}
_PART: Final = r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)"


def parse_duration(text: object) -> dt.timedelta:
    """Go's ``time.ParseDuration``, unsigned (neither KLM nor cert-manager takes a negative
    one); ``ValueError`` saying what a duration looks like otherwise."""
    if text == "0":
        return dt.timedelta(0)
    if not isinstance(text, str) or not re.fullmatch(f"(?:{_PART})+", text):
        raise ValueError(f"invalid duration {text!r} (a Go duration such as 2160h or 1h30m)")
    seconds = sum((Fraction(n) * _UNITS[u] for n, u in re.findall(_PART, text)), Fraction(0))
    return dt.timedelta(microseconds=int(seconds * 10**6))


__all__ = ["parse_duration"]
