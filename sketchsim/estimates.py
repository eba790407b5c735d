"""Run-time estimates in words (the rates they use are in :mod:`sketchsim.config`)."""

from __future__ import annotations

import math

__all__ = ["duration_words", "byte_size"]


def duration_words(secs: float) -> str:
    """``secs`` in words: "about 3 days", "over 1e292 years"."""
    if not math.isfinite(secs) or secs > 1e300:
        return "over 1e292 years"
    for unit, size in (("years", 365.25 * 86400), ("days", 86400), ("hours", 3600), ("min", 60)):
        if secs >= 2 * size:
            return f"about {secs / size:,.3g} {unit}"
    return f"about {secs:.3g} s"


def byte_size(n: float, unit: str | None = None) -> str:
    """``n`` bytes in binary units: "1.5 GiB", "312 bytes"; ``unit="GiB"`` fixes the unit
    (three significant digits: "0.0001 GiB")."""
    scales = (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10))
    if unit is not None:
        return f"{n / dict(scales)[unit]:.3g} {unit}"
    for name, scale in scales:
        if n >= scale:
            return f"{n / scale:,.1f} {name}"
    return f"{n:,.0f} bytes"
