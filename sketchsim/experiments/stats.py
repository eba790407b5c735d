"""Seed statistics of a sweep: 95% intervals of a mean, and the OOD transition read off them.

A rank's test accuracy over ``n`` seeds gets the Student-t interval
``mean +- t(0.975, n-1) * sd / sqrt(n)`` (clipped to [0, 1]); with fewer than
:data:`MIN_SEEDS_FOR_INTERVAL` seeds there is no
interval.  The transition rank of a scale is the smallest rank whose interval's
lower end clears the accuracy threshold: a rank counts only when the seeds
support it, not when their mean happens to cross the line; the smallest rank
whose interval's *upper* end reaches it is the other end of the transition's
bracket (the ranks below it are shown to fall short).

Two statistics need no threshold: :func:`scale_trend`, the least-squares slope
of accuracy against the token width ``m`` at each fixed rank, and
:func:`rank_trend`, the slope against ``log2 r`` at each scale, each with its
95% interval.  :func:`seed_count_rule` chooses a seed count before a run.
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
    "ols_slope",
    "scale_trend",
    "rank_trend",
    "falls_with_scale",
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

    Values are ``{"rank": r or None, "low": r or None, "supported": bool}``:
    ``low`` is the smallest rank whose interval's upper end reaches ``accuracy``
    (every smaller rank tried is below it), so with accuracy rising in the rank
    the transition lies in ``[low, rank]`` among the ranks tried.
    ``supported`` is False when some rank of that scale has no interval (too
    few seeds), and then both are None: no verdict from too little data.
    """
    maps = {row["feature_map"] for row in summary if row["model"] != "softmax"}
    out: dict[str, dict] = {}
    for row in sorted(summary, key=lambda r: r["rank"]):
        if row["model"] == "softmax":
            continue
        name = row["scale"] if len(maps) == 1 else f"{row['scale']} ({row['feature_map']})"
        cell = out.setdefault(name, {"rank": None, "low": None, "supported": True})
        if row.get("ci_low") is None:
            cell["supported"] = False
            continue
        if cell["rank"] is None and row["ci_low"] >= accuracy:
            cell["rank"] = row["rank"]
        if cell["low"] is None and row["ci_high"] >= accuracy:
            cell["low"] = row["rank"]
    for cell in out.values():
        if not cell["supported"]:
            cell["rank"] = cell["low"] = None
    order = {row["scale"]: k for k, row in enumerate(summary)}
    return dict(sorted(out.items(), key=lambda kv: (order.get(kv[0].split(" ")[0], 0), kv[0])))


def ols_slope(x, y) -> dict:
    """Least-squares slope of ``y`` on ``x`` with its two-sided 95% Student-t interval.

    The interval is ``slope +- t(0.975, n-2) * se`` with
    ``se = sqrt(residual variance / sum((x - mean x)^2))``; ``ci_low`` and
    ``ci_high`` are None below three points or when ``x`` is constant.
    """
    from scipy.stats import t

    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    out = {"slope": None, "ci_low": None, "ci_high": None, "n": int(x.size)}
    sxx = float(((x - x.mean()) ** 2).sum()) if x.size else 0.0
    if x.size < 3 or sxx == 0 or not np.isfinite(y).all():
        return out
    slope = float(((x - x.mean()) * (y - y.mean())).sum() / sxx)
    resid = y - y.mean() - slope * (x - x.mean())
    se = math.sqrt(float((resid**2).sum()) / (x.size - 2) / sxx)
    half = float(t.ppf(0.5 + CONFIDENCE / 2, x.size - 2)) * se
    return {**out, "slope": slope, "ci_low": slope - half, "ci_high": slope + half}


def _kernel_values(rows: list[dict], metric: str) -> dict[tuple, list[tuple[str, float]]]:
    """``(feature map, rank) -> [(scale, value), ...]`` over the kernel runs."""
    out: dict[tuple, list[tuple[str, float]]] = {}
    for r in rows:
        s = r["spec"]
        if s["model"] == "softmax":
            continue
        v = r[metric]
        out.setdefault((s["feature_map"], s["rank"]), []).append(
            (s["scale"], math.nan if v is None else float(v))
        )
    return out


def _width(scale: str) -> int:
    """The token width ``m`` of an OOD scale ``m:pool:triples``."""
    return int(scale.split(":")[0])


def scale_trend(rows: list[dict], metric: str = "test_accuracy") -> list[dict]:
    """At each fixed kernel rank (and map): the slope of ``metric`` per bit of ``m`` over scales.

    One least-squares line through every run of that rank at every scale (one
    point per seed and scale, ``x`` the token width ``m``), with its 95%
    interval (:func:`ols_slope`).  It needs no accuracy threshold: if accuracy
    rises with the rank and falls with ``m`` at every rank, the rank any
    threshold needs grows with ``m``.  Runs of different scales use different
    pools and seeds are independent, so the points are independent.
    """
    out = []
    for (fmap, rank), pts in sorted(_kernel_values(rows, metric).items()):
        fit = ols_slope([_width(sc) for sc, _ in pts], [v for _, v in pts])
        out.append({"feature_map": fmap, "rank": rank, "scales": len({sc for sc, _ in pts}), **fit})
    return out


def rank_trend(rows: list[dict], metric: str = "test_accuracy") -> list[dict]:
    """At each scale (and map): the slope of ``metric`` per doubling of the kernel rank.

    One least-squares line through every run of that scale, ``x = log2 r``,
    with its 95% interval (:func:`ols_slope`): the average gain of a doubling
    over the ranks tried (accuracy that saturates makes it an average, not a
    constant rate).
    """
    pts: dict[tuple, list[tuple[float, float]]] = {}
    for (fmap, rank), values in _kernel_values(rows, metric).items():
        for scale, v in values:
            pts.setdefault((scale, fmap), []).append((math.log2(rank), v))
    out = []
    for (scale, fmap), xy in sorted(pts.items(), key=lambda kv: (_width(kv[0][0]), kv[0])):
        fit = ols_slope([x for x, _ in xy], [y for _, y in xy])
        out.append({"scale": scale, "feature_map": fmap, **fit})
    return out


def falls_with_scale(trend: list[dict], feature_map: str) -> bool:
    """True when, for ``feature_map``, every rank's slope against ``m`` has its whole 95%
    interval below zero (an intersection-union test: each rank at the 5% level).

    False when any rank has no interval or only one scale.
    """
    cells = [c for c in trend if c["feature_map"] == feature_map]
    return bool(cells) and all(
        c["ci_high"] is not None and c["scales"] >= 2 and c["ci_high"] < 0 for c in cells
    )


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
