"""A sweep's rows summarized: per cell over seeds, the learning-rate spread, the OOD
transition and its trend with scale, and the plot (no torch here).

A cell is ``(scale, model, feature map, rank)``; :func:`summarize` gives its mean,
min and max over seeds (with 95% intervals where the suite asks,
:mod:`sketchsim.experiments.stats`), :func:`transition` the smallest rank whose
accuracy reaches the threshold per scale, :func:`plot_sweep` the curves.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from sketchsim.errors import SketchsimError

__all__ = ["summarize", "spread", "transition", "transition_grows", "plot_sweep"]


def _group_key(spec: dict) -> tuple:
    return (spec["scale"], spec["model"], spec["feature_map"], spec["rank"])


def summarize(rows: list[dict], metric: str = "sequence_error") -> list[dict]:
    """Mean, min and max of ``metric`` over seeds per (scale, model, feature map, rank).

    Rows that differ only in the learning rate are grouped together; use
    :func:`spread` to report a learning-rate grid.
    """
    groups: dict[tuple, list[float]] = {}
    for r in rows:
        v = r[metric]
        groups.setdefault(_group_key(r["spec"]), []).append(math.inf if v is None else v)
    out = []
    for (scale, model, fmap, rank), vals in sorted(groups.items(), key=_order):
        v = np.array(vals, dtype=float)
        out.append(
            {
                "scale": scale,
                "model": model,
                "feature_map": fmap,
                "rank": rank,
                "seeds": len(v),
                "mean": float(v.mean()),
                "min": float(v.min()),
                "max": float(v.max()),
            }
        )
    return out


def spread(rows: list[dict], metric: str = "sequence_error", lower: bool = True) -> list[dict]:
    """A learning-rate grid, reported both ways.

    Per (scale, model, map, rank): ``best`` is the best over the grid of the
    seed-mean (as zoology reports: max accuracy / min error over learning
    rates), with that ``best_lr``; ``mean`` and ``std`` are over seeds at that
    learning rate.
    """
    cells: dict[tuple, dict[float, list[float]]] = {}
    for r in rows:
        v = r[metric]
        cells.setdefault(_group_key(r["spec"]), {}).setdefault(r["spec"]["lr"], []).append(
            math.inf if v is None else v
        )
    out = []
    for key, by_lr in sorted(cells.items(), key=lambda kv: _order((kv[0], None))):
        means = {lr: float(np.mean(v)) for lr, v in by_lr.items()}
        pick = min if lower else max
        best_lr = pick(means, key=lambda lr: (means[lr], lr))
        vals = np.array(by_lr[best_lr], dtype=float)
        scale, model, fmap, rank = key
        out.append(
            {
                "scale": scale,
                "model": model,
                "feature_map": fmap,
                "rank": rank,
                "lrs": sorted(by_lr),
                "best_lr": best_lr,
                "best": means[best_lr],
                "mean": float(vals.mean()),
                "std": float(vals.std()),
                "seeds": len(vals),
            }
        )
    return out


def _order(item):
    (scale, model, fmap, rank), _ = item
    parts = scale.split(":") if scale else []
    numeric = tuple(int(v) for v in parts) if all(v.isdigit() for v in parts) else ()
    return numeric, scale, model, fmap, rank


def transition(summary: list[dict], accuracy: float) -> dict:
    """Per scale and feature map: the smallest kernel rank whose mean test accuracy
    reaches ``accuracy`` (None when no rank does).

    Keys are the scale when one feature map was swept, else ``"scale (map)"``.
    """
    maps = {row["feature_map"] for row in summary if row["model"] != "softmax"}
    out: dict[str, int | None] = {}
    for row in sorted(summary, key=lambda r: r["rank"]):
        if row["model"] == "softmax":
            continue
        name = row["scale"] if len(maps) == 1 else f"{row['scale']} ({row['feature_map']})"
        out.setdefault(name, None)
        if out[name] is None and row["mean"] >= accuracy:
            out[name] = row["rank"]
    order = {row["scale"]: k for k, row in enumerate(summary)}
    return dict(sorted(out.items(), key=lambda kv: (order.get(kv[0].split(" ")[0], 0), kv[0])))


def transition_grows(found: dict, min_scales: int = 3) -> list[str]:
    """Feature maps whose transition rank exists at every scale (at least ``min_scales``)
    and grows with the scale: never smaller at a larger scale, larger at the last.

    ``found`` is :func:`transition`'s output (scales in increasing order).
    """
    per_map: dict[str, list] = {}
    for name, r in found.items():
        fmap = name.split(" (")[1].rstrip(")") if " (" in name else ""
        per_map.setdefault(fmap, []).append(r)
    good = []
    for fmap, ranks in per_map.items():
        if len(ranks) < min_scales or any(r is None for r in ranks):
            continue
        steps = zip(ranks, ranks[1:], strict=False)
        if all(a <= b for a, b in steps) and ranks[-1] > ranks[0]:
            good.append(fmap)
    return good


def plot_sweep(
    summary: list[dict],
    path: str | Path,
    ylabel: str,
    title: str,
    bound: int | None = None,
    threshold: float | None = None,
) -> Path:
    """Error (or accuracy) against r on a log axis; the certified bound as a vertical line.

    The band is the 95% interval of the seed mean where the summary has one
    (``ci_low``, ``ci_high``), else the min-max range over seeds; ``threshold``
    (the OOD transition's accuracy) is a horizontal line.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise SketchsimError("plots need matplotlib: pip install 'sketchsim[plot]'") from None
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    series: dict[tuple, list[dict]] = {}
    for row in summary:
        series.setdefault((row["scale"], row["model"], row["feature_map"]), []).append(row)
    for (scale, model, fmap), rows in series.items():
        rows = sorted(rows, key=lambda r: r["rank"])
        label = f"{model}" + (f" ({fmap})" if model != "softmax" else "")
        label += f" {scale}" if scale else ""
        if model == "softmax":
            ax.axhline(rows[0]["mean"], ls="--", lw=1, color="gray", label=label)
            continue
        ranks = [r["rank"] for r in rows]
        ax.plot(ranks, [r["mean"] for r in rows], marker="o", label=label)
        has_ci = all(r.get("ci_low") is not None for r in rows)
        lo = [r["ci_low"] if has_ci else r["min"] for r in rows]
        hi = [r["ci_high"] if has_ci else r["max"] for r in rows]
        ax.fill_between(ranks, lo, hi, alpha=0.2)
    if threshold is not None:
        ax.axhline(threshold, color="black", ls=":", lw=1, label=f"threshold {threshold:g}")
    if bound:
        ax.axvline(bound, color="red", ls=":", label=f"certified r >= {bound}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("feature rank r")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=7)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
