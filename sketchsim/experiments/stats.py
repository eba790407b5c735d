"""Seed statistics of a sweep: 95% intervals of a mean, and the OOD transition read off them.

A rank's test accuracy over ``n`` seeds gets the Student-t interval
``mean +- t(0.975, n-1) * sd / sqrt(n)`` (clipped to [0, 1]); with fewer than
:data:`MIN_SEEDS_FOR_INTERVAL` seeds there is no
interval.  The transition rank of a scale is the smallest rank whose interval's
lower end clears the accuracy threshold: a rank counts only when the seeds
support it, not when their mean happens to cross the line.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["MIN_SEEDS_FOR_INTERVAL", "mean_interval", "with_intervals", "interval_transition"]

CONFIDENCE = 0.95

#: Seeds a rank needs before its accuracy gets an interval (and a verdict).
MIN_SEEDS_FOR_INTERVAL = 3


def mean_interval(values, low: float = 0.0, high: float = 1.0) -> tuple[float, float] | None:
    """The two-sided 95% Student-t interval of the mean of ``values`` (None below 3 values)."""
    from scipy.stats import t

    v = np.asarray(values, dtype=float)
    if v.size < MIN_SEEDS_FOR_INTERVAL or not np.isfinite(v).all():
        return None
    half = float(t.ppf(0.5 + CONFIDENCE / 2, v.size - 1) * v.std(ddof=1) / math.sqrt(v.size))
    mean = float(v.mean())
    return max(low, mean - half), min(high, mean + half)


def with_intervals(rows: list[dict], metric: str, summary: list[dict]) -> list[dict]:
    """``summary`` (one entry per cell) with ``ci_low``/``ci_high`` of ``metric`` over seeds."""
    values: dict[tuple, list[float]] = {}
    for r in rows:
        s = r["spec"]
        key = (s["scale"], s["model"], s["feature_map"], s["rank"])
        v = r[metric]
        values.setdefault(key, []).append(math.nan if v is None else float(v))
    out = []
    for row in summary:
        key = (row["scale"], row["model"], row["feature_map"], row["rank"])
        ci = mean_interval(values.get(key, []))
        out.append({**row, "ci_low": ci and ci[0], "ci_high": ci and ci[1]})
    return out


def interval_transition(summary: list[dict], accuracy: float) -> dict:
    """Per scale (and map): the smallest kernel rank whose interval's lower end is >= ``accuracy``.

    Values are ``{"rank": r or None, "supported": bool}``; ``supported`` is False
    when some rank of that scale has no interval (too few seeds), and then
    ``rank`` is None: no verdict from too little data.
    """
    maps = {row["feature_map"] for row in summary if row["model"] != "softmax"}
    out: dict[str, dict] = {}
    for row in sorted(summary, key=lambda r: r["rank"]):
        if row["model"] == "softmax":
            continue
        name = row["scale"] if len(maps) == 1 else f"{row['scale']} ({row['feature_map']})"
        cell = out.setdefault(name, {"rank": None, "supported": True})
        if row.get("ci_low") is None:
            cell["supported"] = False
        elif cell["rank"] is None and row["ci_low"] >= accuracy:
            cell["rank"] = row["rank"]
    for cell in out.values():
        if not cell["supported"]:
            cell["rank"] = None
    order = {row["scale"]: k for k, row in enumerate(summary)}
    return dict(sorted(out.items(), key=lambda kv: (order.get(kv[0].split(" ")[0], 0), kv[0])))
