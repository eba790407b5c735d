"""Run-time estimates in words (the rates they use are in :mod:`sketchsim.config`)."""

from __future__ import annotations

import math

__all__ = ["duration_words"]


def duration_words(secs: float) -> str:
    """``secs`` in words: "about 3 days", "over 1e292 years"."""
    if not math.isfinite(secs) or secs > 1e300:
        return "over 1e292 years"
    for unit, size in (("years", 365.25 * 86400), ("days", 86400), ("hours", 3600), ("min", 60)):
        if secs >= 2 * size:
            return f"about {secs / size:,.3g} {unit}"
    return f"about {secs:.3g} s"
