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

from sketchsim.errors import SketchsimError

__all__ = [
    "MIN_SEEDS_FOR_INTERVAL",
    "mean_interval",
    "with_intervals",
    "interval_transition",
    "pooled_seed_sd",
    "seeds_for_half_width",
    "seed_count_rule",
]

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


def pooled_seed_sd(rows: list[dict], metric: str, threshold: float, band: float) -> dict:
    """The seed spread of ``metric`` pooled over the kernel cells whose seed mean lies near
    ``threshold`` (within ``band``).

    Each cell (scale, map, rank) with at least two seeds contributes its sum of
    squared deviations from its own mean and ``seeds - 1`` degrees of freedom;
    the pooled sd is ``sqrt(sum of squares / degrees of freedom)``.

    Returns
    -------
    dict
        ``sd``, ``df`` (degrees of freedom) and ``cells`` (how many cells were pooled).
    """
    values: dict[tuple, list[float]] = {}
    for r in rows:
        s = r["spec"]
        if s["model"] == "softmax" or r[metric] is None:
            continue
        values.setdefault((s["scale"], s["feature_map"], s["rank"]), []).append(float(r[metric]))
    ss, df, cells = 0.0, 0, 0
    for v in values.values():
        a = np.asarray(v)
        if a.size < 2 or abs(a.mean() - threshold) > band:
            continue
        ss += float(((a - a.mean()) ** 2).sum())
        df += a.size - 1
        cells += 1
    return {"sd": math.sqrt(ss / df) if df else None, "df": df, "cells": cells}


def seeds_for_half_width(sd: float, half_width: float, max_seeds: int = 1000) -> int:
    """The fewest seeds ``n >= 3`` whose 95% Student-t half-width ``t(0.975, n-1) sd / sqrt(n)``
    is at most ``half_width`` (``max_seeds`` when none up to it is)."""
    from scipy.stats import t

    for n in range(MIN_SEEDS_FOR_INTERVAL, max_seeds + 1):
        if t.ppf(0.5 + CONFIDENCE / 2, n - 1) * sd / math.sqrt(n) <= half_width:
            return n
    return max_seeds


def seed_count_rule(
    pilot_rows: list[dict],
    threshold: float,
    half_width: float = 0.01,
    band: float = 0.05,
    metric: str = "test_accuracy",
) -> dict:
    """Seeds per cell so that the 95% interval at the threshold is at most ``half_width`` wide
    on each side, from the seed spread of a pilot sweep.

    The rule: pool the pilot's seed spread over the kernel cells whose mean is
    within ``band`` of ``threshold`` (:func:`pooled_seed_sd`); take the upper
    end of its one-sided 95% chi-square interval, ``sd * sqrt(df / chi2(0.05, df))``
    (a spread measured on a few seeds per cell is itself uncertain, so the rule
    plans for the larger plausible spread); return the fewest seeds whose
    Student-t half-width at that spread is at most ``half_width``.

    Returns
    -------
    dict
        ``seeds`` and what it was computed from: ``pooled_sd``, ``sd_upper``,
        ``df``, ``cells``, ``threshold``, ``half_width``, ``band``.
    """
    from scipy.stats import chi2

    pooled = pooled_seed_sd(pilot_rows, metric, threshold, band)
    if not pooled["df"]:
        raise SketchsimError(
            f"no pilot cell with two or more seeds has a mean within {band} of {threshold}",
            param="pilot",
        )
    upper = pooled["sd"] * math.sqrt(pooled["df"] / chi2.ppf(1 - CONFIDENCE, pooled["df"]))
    return {
        "seeds": seeds_for_half_width(upper, half_width),
        "pooled_sd": pooled["sd"],
        "sd_upper": upper,
        "df": pooled["df"],
        "cells": pooled["cells"],
        "threshold": threshold,
        "half_width": half_width,
        "band": band,
    }
