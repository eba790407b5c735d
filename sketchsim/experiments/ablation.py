"""Why the learned softmax head failed on the witness family: a small ablation.

``sketchsim ablation [--seeds S] [--json PATH]`` (the run
:mod:`sketchsim.runs.ablation`) prints one markdown table (docs/results.md
quotes it).  Every row trains the same
:class:`~sketchsim.experiments.models.SoftmaxHead` from random init and reports
the error on the witness family; only the training data, the token encoding
and the optimizer change.  ``const per query`` is the squared error of the best
head that ignores the context and answers one number per query token:
a trained head near it has learned the family's query statistics, not Min-IP.

``--screen-maps m:pool:triples`` instead compares the nonnegative parametric
feature maps on a validation split drawn from the OOD *train* pool only
(:func:`~sketchsim.experiments.suites.ood_validation`): how the map of the OOD
transition runs is chosen without looking at the test pool.
:func:`screen_plateau` asks, on the same validation splits, why the OOD kernel
heads plateau below exact accuracy (:data:`PLATEAU_VARIANTS`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from sketchsim.config import OOD_STOP_BELOW
from sketchsim.experiments.models import make_head
from sketchsim.experiments.suites import Split, random_triples, witness_split
from sketchsim.experiments.train import fit, loss_fn, metrics

__all__ = [
    "run_ablation",
    "Variant",
    "VARIANTS",
    "run_variant",
    "per_query_baseline",
    "screen_maps",
    "screen_stops",
    "pick_margin",
    "PLATEAU_VARIANTS",
    "screen_plateau",
]


@dataclass(frozen=True)
class Variant:
    """One ablation row."""

    name: str
    data: str  # "family" or "random"
    encoding: str
    lr: float
    optimizer: str = "adam"
    schedule: bool = False  # warm-up 100 steps, cosine decay, clip 1.0


VARIANTS = (
    Variant("family, 0/1 tokens, Adam 0.03 (first round)", "family", "01", 0.03),
    Variant("family, +-1 tokens, Adam 0.03", "family", "pm1", 0.03),
    Variant("family, +-1 tokens, Adam 0.01", "family", "pm1", 0.01),
    Variant("family, +-1, AdamW warm-up+cosine, clip", "family", "pm1", 0.03, "adamw", True),
    Variant("random triples, 0/1 tokens, Adam 0.03", "random", "01", 0.03),
    Variant("random triples, +-1 tokens, Adam 0.03", "random", "pm1", 0.03),
)


def per_query_baseline(split: Split) -> float:
    """Mean squared error of answering each query token's mean target."""
    p = split.scored
    q = split.tokens[:, p]
    t = split.targets[:, 0]
    _, inv = np.unique(q, axis=0, return_inverse=True)
    means = np.bincount(inv, weights=t) / np.bincount(inv)
    return float(np.mean((t - means[inv]) ** 2))


def run_variant(v: Variant, family, seed: int, steps: int, triples: int) -> dict:
    """Train one variant; metrics on its training set and on the family."""
    fam = witness_split(family)
    train = fam if v.data == "family" else random_triples(family.m, triples, seed)
    head = make_head("softmax", family.m, seed=seed, encoding=v.encoding)
    x = torch.tensor(train.tokens, dtype=torch.float32)
    t = torch.tensor(train.targets, dtype=torch.float32)
    res = fit(
        head,
        x,
        None,
        t,
        steps=steps,
        lr=v.lr,
        seed=seed,
        scored=train.scored,
        optimizer=v.optimizer,
        warmup=100 if v.schedule else 0,
        cosine=v.schedule,
        clip=1.0 if v.schedule else None,
    )
    with torch.no_grad():
        y = head(torch.tensor(fam.tokens, dtype=torch.float32))[:, fam.scored :][:, :1]
    tf = torch.tensor(fam.targets)
    seq, _, mx = metrics(y, tf)
    return {
        "variant": v.name,
        "seed": seed,
        "steps": res.steps,
        "train_sequence_error": res.sequence_error,
        "family_sequence_error": seq,
        "family_max_abs_error": mx,
        "family_mse": float(loss_fn(y, tf)),
        "beta": float(_beta(head)),
    }


def _beta(head) -> float:
    inner = getattr(head, "head", head)
    return inner.log_beta.exp().item()


def _screen(scale: str, seeds: int, configs, steps: int, lr: float, progress=None) -> list[dict]:
    """Train every ``(model, feature_map, rank, stop_below)`` of ``configs`` on each
    seed's validation split of ``scale``'s train pool; one row per run."""
    from sketchsim.experiments.suites import ood_validation, parse_scales
    from sketchsim.experiments.sweep import RunSpec, train_one
    from sketchsim.units import run_units

    ((m, pool, triples),) = parse_scales(scale)
    splits: dict[int, tuple] = {}  # per seed: its (fit, validation) split, drawn once

    def unit(i: int, _client) -> tuple:
        seed, config = divmod(i, len(configs))
        if seed not in splits:
            splits[seed] = ood_validation(m, pool, triples, seed)
        return (seed, *configs[config])

    def measure(seed, model, fmap, r, stop_below) -> dict:
        spec = RunSpec(
            "ood-validation", scale, model, fmap, r, seed, steps=steps, lr=lr,
            stop_below=stop_below, train_on="pool",
        )  # fmt: skip
        fit_split, val_split = splits[seed]
        run = train_one(spec, fit_split, None, val_split, "cpu")
        return {
            "scale": scale,
            "model": model,
            "feature_map": fmap,
            "rank": r,
            "stop_below": stop_below,
            "seed": seed,
            "validation_accuracy": run.test_accuracy,
            "train_sequence_error": run.train_sequence_error,
            "steps": run.steps,
            "seconds": run.seconds,
        }

    def finished(_i: int, row: dict) -> None:
        if progress:
            progress(row)

    return run_units(unit, measure, seeds * len(configs), finished=finished)


def screen_maps(
    scale: str,
    ranks: tuple[int, ...],
    seeds: int,
    steps: int = 1000,
    lr: float = 0.01,
    stop_below: float = OOD_STOP_BELOW,
    maps: tuple[str, ...] | None = None,
    progress=None,
) -> list[dict]:
    """Validation accuracy of kernel heads per nonnegative parametric map and rank.

    Every head is trained with the OOD protocol (the sweep's ``RunSpec``) on
    triples of one half of the train pool's tokens and scored on triples of the
    other half (:func:`~sketchsim.experiments.suites.ood_validation`).
    """
    from sketchsim.experiments.feature_maps import REGISTRY

    if maps is None:
        maps = tuple(n for n, c in REGISTRY.items() if c.nonnegative and not c.reads_ids)
    configs = [("kernel", fmap, r, stop_below) for fmap in maps for r in ranks]
    return _screen(scale, seeds, configs, steps, lr, progress)


def screen_stops(
    scales: str,
    margins: tuple[float, ...],
    seeds: int,
    steps: int = 1000,
    lr: float = 0.01,
    kernel: tuple[str, int] | None = ("elu1", 16),
    progress=None,
) -> list[dict]:
    """Validation accuracy per training stop margin, for the softmax head.

    The stop margin is part of the OOD protocol that every model shares: a
    run stops once every training error is below it, or after ``steps``.
    This screens it on the validation split of each scale's train pool, so
    the margin is chosen without the test pool.  The ``kernel`` head
    (feature map, rank) is trained at the largest margin only: a smaller
    margin follows the same trajectory and stops no earlier, so a kernel run
    that used all ``steps`` there is the same run at every margin.
    """
    from sketchsim.experiments.suites import parse_scales

    rows = []
    for m, pool, triples in parse_scales(scales):
        configs = [("softmax", "-", 0, s) for s in margins]
        if kernel is not None:
            configs.append(("kernel", kernel[0], kernel[1], max(margins)))
        rows += _screen(f"{m}:{pool}:{triples}", seeds, configs, steps, lr, progress)
    return rows


def pick_margin(rows: list[dict]) -> float:
    """The stop margin whose worst softmax validation accuracy (over scales and
    seeds) is highest; a tie goes to the larger margin (the earlier stop)."""
    worst: dict[float, float] = {}
    for row in rows:
        if row["model"] == "softmax":
            s = row["stop_below"]
            worst[s] = min(worst.get(s, 1.0), row["validation_accuracy"])
    return max(worst, key=lambda s: (worst[s], s))


def run_ablation(seeds: int, steps: int, triples: int, on_start=None, on_variant=None) -> dict:
    """Every training variant of :data:`VARIANTS` over ``seeds`` seeds on the witness family.

    ``on_start(inputs, baseline_mse)`` is called before training, and
    ``on_variant(variant, rows)`` after each variant's seeds.  Returns the
    family's size, the constant-per-query baseline MSE and one row per run.
    """
    from sketchsim.certify import build_witness
    from sketchsim.certify.codes import hadamard_code

    family = build_witness(hadamard_code(24), "hadamard", 12)
    base = per_query_baseline(witness_split(family))
    if on_start is not None:
        on_start(len(family.tokens), base)
    from sketchsim.units import run_units

    rows: list[dict] = []

    def finished(i: int, row: dict) -> None:  # units in order: variant by variant
        rows.append(row)
        if on_variant is not None and len(rows) % seeds == 0:
            on_variant(VARIANTS[i // seeds], rows[-seeds:])

    units = [(v, family, s, steps, triples) for v in VARIANTS for s in range(seeds)]
    run_units(units, run_variant, finished=finished)
    return {"inputs": len(family.tokens), "baseline_mse": base, "rows": rows}


#: The plateau ablation: each variant changes one thing of the OOD kernel protocol
#: (``steps``, ``dtype``, the ``rank``, or ``triples`` times more training and
#: validation triples); ``default`` is the plan's protocol.
PLATEAU_VARIANTS = {
    "default": {},
    "4x steps": {"steps": 4},
    "float64": {"dtype": "float64"},
    "2x triples": {"triples": 2},
    "4x rank": {"rank": 4},
}


def screen_plateau(
    scales: str,
    rank: int,
    seeds: int,
    steps: int = 1000,
    lr: float = 0.01,
    feature_map: str = "elu1",
    variants: dict | None = None,
    progress=None,
) -> list[dict]:
    """Why OOD kernel heads plateau below exact accuracy: one change at a time, on validation.

    Each variant of ``variants`` (default :data:`PLATEAU_VARIANTS`) trains the
    ``feature_map`` kernel head of rank ``rank`` with the OOD protocol
    (Adam ``lr``, at most ``steps`` steps, stop once every training error is
    below :data:`~sketchsim.config.OOD_STOP_BELOW`, ``pm1`` tokens) on one half
    of each scale's train pool and scores the other half
    (:func:`~sketchsim.experiments.suites.ood_validation`; the test pool is
    never drawn).  Besides the validation accuracy each row says whether the
    run reached the stop margin (``steps`` below the cap) and how the wrong
    validation positions miss: ``near_miss`` is the share of them off by less
    than 1 (the target is an integer, exact means off by less than 1/2).
    """
    from sketchsim.experiments.suites import ood_validation, parse_scales

    variants = PLATEAU_VARIANTS if variants is None else variants
    rows = []
    for m, pool, triples in parse_scales(scales):
        for seed in range(seeds):
            for name, change in variants.items():
                n = triples * change.get("triples", 1)
                fit_split, val_split = ood_validation(m, pool, n, seed)
                row = _plateau_run(
                    fit_split,
                    val_split,
                    rank * change.get("rank", 1),
                    seed,
                    steps * change.get("steps", 1),
                    lr,
                    feature_map,
                    change.get("dtype", "float32"),
                )
                rows.append({"variant": name, "scale": f"{m}:{pool}:{triples}", **row})
                if progress:
                    progress(rows[-1])
    return rows


def _plateau_run(fit_split, val_split, rank, seed, steps, lr, feature_map, dtype) -> dict:
    dt = {"float32": torch.float32, "float64": torch.float64}[dtype]
    m = fit_split.tokens.shape[-1]
    head = make_head("kernel", m, rank, feature_map, seed=seed, encoding="pm1").to(dt)
    x = torch.tensor(fit_split.tokens, dtype=dt)
    t = torch.tensor(fit_split.targets, dtype=dt)
    res = fit(head, x, None, t, steps=steps, lr=lr, seed=seed, stop_below=OOD_STOP_BELOW)
    with torch.no_grad():
        y = head(torch.tensor(val_split.tokens, dtype=dt), None)
    tv = torch.tensor(val_split.targets, dtype=dt)
    seq, _, mx = metrics(y, tv)
    err = (y - tv).abs().numpy()
    wrong = err[err >= 0.5]
    return {
        "rank": rank,
        "seed": seed,
        "dtype": dtype,
        "triples": len(fit_split.tokens),
        "validation_accuracy": 1.0 - seq,
        "validation_max_abs_error": mx,
        "wrong_positions": int(wrong.size),
        "near_miss": float((wrong < 1.0).mean()) if wrong.size else None,
        "train_sequence_error": res.sequence_error,
        "train_max_abs_error": res.max_abs_error,
        "steps": res.steps,
        "step_cap": steps,
        "reached_margin": res.steps < steps,
        "seconds": res.seconds,
    }
