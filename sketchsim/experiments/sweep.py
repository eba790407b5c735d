"""Sweeps over (model, feature rank, seed): rows, summaries, transition points, plots.

Results live in one JSON file rewritten atomically after every run; with
``resume`` the runs already in it (same key) are skipped.
"""

from __future__ import annotations

import json
import platform
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from sketchsim.errors import SketchsimError
from sketchsim.experiments.models import make_head
from sketchsim.experiments.suites import Split
from sketchsim.experiments.train import fit, metrics, pick_device, token_ids
from sketchsim.results import versions, write_json_atomic

__all__ = ["Run", "RunSpec", "run_sweep", "summarize", "transition", "plot_sweep"]


@dataclass(frozen=True)
class RunSpec:
    """One training run: what to train on which data."""

    suite: str
    scale: str
    model: str
    feature_map: str
    rank: int
    seed: int

    def key(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


@dataclass
class Run:
    """A finished run: its spec, training metrics, test metrics (OOD) and cost."""

    spec: dict
    sequence_error: float
    position_error: float
    max_abs_error: float
    test_sequence_error: float | None
    test_accuracy: float | None
    steps: int
    seconds: float
    device: str


def _tensors(split: Split, device):
    ids, vocab = token_ids(split.tokens)
    x = torch.tensor(split.tokens, dtype=torch.float32, device=device)
    t = torch.tensor(split.targets, dtype=torch.float32, device=device)
    return x, torch.tensor(ids, device=device), t, vocab


def train_one(
    spec: RunSpec, train: Split, test: Split | None, steps: int, lr: float, device: str
) -> Run:
    """Train one head on ``train`` (and score it on ``test``)."""
    dev = pick_device(device)
    x, ids, t, vocab = _tensors(train, dev)
    m = train.tokens.shape[-1]
    head = make_head(spec.model, m, spec.rank, spec.feature_map, vocab=vocab, seed=spec.seed)
    res = fit(
        head, x, ids, t, steps=steps, lr=lr, seed=spec.seed, device=str(dev), scored=train.scored
    )
    test_seq = test_acc = None
    if test is not None:
        xt, _, tt, _ = _tensors(test, dev)
        with torch.no_grad():
            y = head(xt, None)
        test_seq = metrics(y, tt)[0]
        test_acc = 1.0 - test_seq
    return Run(
        asdict(spec),
        res.sequence_error,
        res.position_error,
        res.max_abs_error,
        test_seq,
        test_acc,
        res.steps,
        res.seconds,
        res.device,
    )


def run_sweep(
    specs: Iterable[RunSpec],
    data: Callable[[RunSpec], tuple[Split, Split | None]],
    path: str | Path | None,
    header: dict,
    steps: int,
    lr: float = 0.03,
    device: str = "auto",
    resume: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> list[dict]:
    """Run every spec (skipping finished ones on resume), saving after each run."""
    specs = list(specs)
    done: dict[str, dict] = {}
    if resume and path and Path(path).exists():
        try:
            old = json.loads(Path(path).read_text())
        except ValueError:
            raise SketchsimError(f"cannot resume from {path}: not JSON") from None
        if old.get("header") != header:
            raise SketchsimError(f"cannot resume from {path}: it was made with other settings")
        done = {RunSpec(**r["spec"]).key(): r for r in old.get("runs", [])}
    rows = []
    for k, spec in enumerate(specs):
        if spec.key() in done:
            rows.append(done[spec.key()])
        else:
            train, test = data(spec)
            rows.append(asdict(train_one(spec, train, test, steps, lr, device)))
            if path:
                write_json_atomic(
                    path,
                    {
                        "header": header,
                        "runs": rows,
                        "complete": False,
                        "versions": {
                            **versions(),
                            "torch": torch.__version__,
                            "machine": platform.machine(),
                        },
                    },
                )
        if progress:
            progress(k + 1, len(specs))
    if path:
        write_json_atomic(
            path,
            {
                "header": header,
                "runs": rows,
                "complete": True,
                "versions": {
                    **versions(),
                    "torch": torch.__version__,
                    "machine": platform.machine(),
                },
            },
        )
    return rows


def summarize(rows: list[dict], metric: str = "sequence_error") -> list[dict]:
    """Mean, min and max of ``metric`` over seeds per (scale, model, feature map, rank)."""
    groups: dict[tuple, list[float]] = {}
    for r in rows:
        s = r["spec"]
        key = (s["scale"], s["model"], s["feature_map"], s["rank"])
        groups.setdefault(key, []).append(r[metric])
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


def _order(item):
    (scale, model, fmap, rank), _ = item
    parts = scale.split(":") if scale else []
    numeric = tuple(int(v) for v in parts) if all(v.isdigit() for v in parts) else ()
    return numeric, scale, model, fmap, rank


def transition(summary: list[dict], accuracy: float) -> dict:
    """Per scale: the smallest kernel rank whose mean test accuracy reaches ``accuracy``."""
    out: dict[str, int | None] = {}
    for row in summary:
        if row["model"] == "softmax":
            continue
        out.setdefault(row["scale"], None)
        if out[row["scale"]] is None and row["mean"] >= accuracy:
            out[row["scale"]] = row["rank"]
    return out


def plot_sweep(
    summary: list[dict], path: str | Path, ylabel: str, title: str, bound: int | None = None
) -> Path:
    """Error (or accuracy) against r on a log axis; the certified bound as a vertical line."""
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
        ax.fill_between(ranks, [r["min"] for r in rows], [r["max"] for r in rows], alpha=0.2)
    if bound:
        ax.axvline(bound, color="red", ls=":", label=f"certified r >= {bound}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("feature rank r")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
