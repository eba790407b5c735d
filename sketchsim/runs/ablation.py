"""``ablation`` as a library run: the softmax ablation and the two validation screens.

Each plan validates its options, :func:`run` trains its heads (torch extra,
one torch thread) through :mod:`sketchsim.experiments.ablation`, and the run
object computes what the tables show (means, worst accuracies, the kernel
runs that used every step) and writes its own result file.  Importing this
module does not import torch.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from sketchsim.config import OOD_STOP_BELOW
from sketchsim.errors import SketchsimError

__all__ = [
    "AblationPlan",
    "ScreenMapsPlan",
    "ScreenStopPlan",
    "AblationRun",
    "ScreenMapsRun",
    "ScreenStopRun",
    "run",
    "ABLATION_MAX_SEEDS",
    "ABLATION_MAX_STEPS",
    "ABLATION_MAX_TRIPLES",
]

#: Largest seeds, steps and triples an ablation run accepts (each trains seeds x variants heads).
ABLATION_MAX_SEEDS = 1_000
ABLATION_MAX_STEPS = 10_000_000
ABLATION_MAX_TRIPLES = 10_000_000


def check_budget(seeds: int, steps: int, lr: float, triples: int) -> None:
    """Refuse seeds, steps, triples or a learning rate out of range (every ablation run)."""
    if seeds < 1 or steps < 1:
        raise SketchsimError("--seeds and --steps must be >= 1")
    for flag, value, limit in (
        ("--seeds", seeds, ABLATION_MAX_SEEDS),
        ("--steps", steps, ABLATION_MAX_STEPS),
        ("--triples", triples, ABLATION_MAX_TRIPLES),
    ):
        if value > limit:
            raise SketchsimError(f"{flag} = {value:,} is above the limit {limit:,}")
    if triples < 1:
        raise SketchsimError(f"--triples must be >= 1, got {triples}")
    if not (math.isfinite(lr) and 0 < lr <= 1e6):
        raise SketchsimError(f"--lr must be in (0, 1e6], got {lr}")


@dataclass(frozen=True)
class AblationPlan:
    """The softmax ablation: every training variant
    (:data:`sketchsim.experiments.ablation.VARIANTS`) for ``seeds`` seeds of
    ``steps`` steps on the witness family; random-triple variants draw ``triples``."""

    seeds: int = 2
    steps: int = 2000
    triples: int = 4000

    command = "ablation"

    def params(self) -> dict:
        """The parameters recorded in the result file."""
        return {"seeds": self.seeds, "steps": self.steps, "triples": self.triples}

    def validate(self, lr: float = 0.01) -> None:
        """One-line errors for impossible settings (``lr``: the CLI's unused default)."""
        check_budget(self.seeds, self.steps, lr, self.triples)


@dataclass(frozen=True)
class ScreenMapsPlan:
    """Compare the nonnegative feature maps at each rank of ``ranks`` on the validation
    split of the train pool of ``scale`` (``M:POOL:TRIPLES``)."""

    scale: str
    ranks: tuple[int, ...] = (16, 64)
    seeds: int = 2
    steps: int = 2000
    lr: float = 0.01

    command = "ablation --screen-maps"

    def params(self) -> dict:
        """The parameters recorded in the result file."""
        return {
            "scale": self.scale,
            "ranks": list(self.ranks),
            "seeds": self.seeds,
            "steps": self.steps,
            "lr": self.lr,
            "stop_below": OOD_STOP_BELOW,
        }

    def validate(self, triples: int = 4000) -> None:
        """One-line errors before any output (``triples``: the CLI's unused default)."""
        from sketchsim.experiments.suites import parse_scales

        if not self.ranks or min(self.ranks) < 1:
            raise SketchsimError("--ranks must be >= 1")
        check_budget(self.seeds, self.steps, self.lr, triples)
        parse_scales(self.scale)


@dataclass(frozen=True)
class ScreenStopPlan:
    """Screen the OOD stop margins ``margins`` on the validation splits of the train pools
    of ``scales`` (comma list of ``M:POOL:TRIPLES``)."""

    margins: tuple[float, ...]
    scales: str = "8:64:2000,10:128:2000,12:256:2000"
    seeds: int = 2
    steps: int = 2000
    lr: float = 0.01
    #: The ``elu1`` kernel head's rank, trained at the largest margin (0: softmax alone).
    kernel_rank: int = 16

    command = "ablation --screen-stop"

    def params(self) -> dict:
        """The parameters recorded in the result file."""
        return {
            "scales": self.scales,
            "margins": list(self.margins),
            "seeds": self.seeds,
            "steps": self.steps,
            "lr": self.lr,
            # files of the default (every file before the option) keep their parameters
            **({"kernel_rank": self.kernel_rank} if self.kernel_rank != 16 else {}),
        }

    def validate(self, triples: int = 4000) -> None:
        """One-line errors before any output (``triples``: the CLI's unused default)."""
        from sketchsim.experiments.suites import parse_scales

        if not self.margins or not all(0 < s <= 0.5 for s in self.margins):
            raise SketchsimError("stop margins must be in (0, 0.5]")
        if self.kernel_rank < 0:
            raise SketchsimError("--ranks with --screen-stop is one rank >= 0 (0: softmax alone)")
        check_budget(self.seeds, self.steps, self.lr, triples)
        parse_scales(self.scales)


def _write(json_path, plan, results: dict) -> Path:
    from sketchsim.results import result_payload, write_json_atomic

    return write_json_atomic(json_path, result_payload(plan.command, plan.params(), results))


@dataclass
class AblationRun:
    """The witness family's size, the constant-per-query baseline MSE and one row per run."""

    plan: AblationPlan
    inputs: int
    baseline_mse: float
    rows: list = field(default_factory=list)

    def variants(self) -> dict[str, list[dict]]:
        """The rows of each variant (one per seed), in the order they were trained."""
        out: dict[str, list[dict]] = {}
        for row in self.rows:
            out.setdefault(row["variant"], []).append(row)
        return out

    def to_dict(self) -> dict:
        """The measured keys of the result file."""
        return {"baseline_mse": self.baseline_mse, "rows": self.rows}

    def write(self, json_path) -> Path:
        """Write the result file (``sketchsim ablation --json``) atomically."""
        return _write(json_path, self.plan, self.to_dict())


@dataclass
class ScreenMapsRun:
    """One row per (feature map, rank, seed): its validation accuracy."""

    plan: ScreenMapsPlan
    rows: list = field(default_factory=list)

    @property
    def maps(self) -> list[str]:
        """The feature maps screened, in the order they were trained."""
        return list(dict.fromkeys(row["feature_map"] for row in self.rows))

    def mean_accuracy(self, feature_map: str, rank: int) -> float:
        """Mean validation accuracy over the seeds of one map at one rank."""
        import numpy as np

        accs = [
            x["validation_accuracy"]
            for x in self.rows
            if (x["feature_map"], x["rank"]) == (feature_map, rank)
        ]
        return float(np.mean(accs))

    def to_dict(self) -> dict:
        """The measured keys of the result file."""
        return {"rows": self.rows}

    def write(self, json_path) -> Path:
        """Write the result file (``sketchsim ablation --screen-maps --json``) atomically."""
        return _write(json_path, self.plan, self.to_dict())


@dataclass
class ScreenStopRun:
    """One row per (scale, model, stop margin, seed) and the margin chosen from them."""

    plan: ScreenStopPlan
    rows: list = field(default_factory=list)
    chosen: float | None = None

    @property
    def scales(self) -> list[str]:
        """The scales screened, in order."""
        return list(dict.fromkeys(row["scale"] for row in self.rows))

    @property
    def configs(self) -> list[tuple[str, float]]:
        """Every ``(model, stop margin)`` screened, in order."""
        return list(dict.fromkeys((row["model"], row["stop_below"]) for row in self.rows))

    def accuracies(self, model: str, stop_below: float, scale: str) -> list[float]:
        """Validation accuracy per seed of one model and margin at one scale."""
        return [
            x["validation_accuracy"]
            for x in self.rows
            if (x["model"], x["stop_below"], x["scale"]) == (model, stop_below, scale)
        ]

    def worst(self, model: str, stop_below: float) -> float:
        """Lowest validation accuracy of one model and margin over scales and seeds."""
        return min(
            x["validation_accuracy"]
            for x in self.rows
            if (x["model"], x["stop_below"]) == (model, stop_below)
        )

    def kernel_steps(self) -> tuple[int, int] | None:
        """``(runs that used every step, runs)`` of the kernel head, or None without one."""
        kernel = [row for row in self.rows if row["model"] == "kernel"]
        if not kernel:
            return None
        return sum(row["steps"] == self.plan.steps for row in kernel), len(kernel)

    def to_dict(self) -> dict:
        """The measured keys of the result file."""
        return {"rows": self.rows, "chosen": self.chosen}

    def write(self, json_path) -> Path:
        """Write the result file (``sketchsim ablation --screen-stop --json``) atomically."""
        return _write(json_path, self.plan, self.to_dict())


def run(
    plan: AblationPlan | ScreenMapsPlan | ScreenStopPlan,
    json_path=None,
    on_start: Callable[[int, float], None] | None = None,
    on_variant: Callable[[object, list[dict]], None] | None = None,
    progress: Callable[[dict], None] | None = None,
):
    """Train every head of ``plan`` on one torch thread; write the result file when asked.

    Parameters
    ----------
    plan : AblationPlan, ScreenMapsPlan or ScreenStopPlan
    json_path : path-like, optional
        Receives the result file (``sketchsim ablation --json``).
    on_start : callable, optional
        Ablation: ``on_start(inputs, baseline_mse)`` before training.
    on_variant : callable, optional
        Ablation: ``on_variant(variant, rows)`` after each variant's seeds.
    progress : callable, optional
        Screens: ``progress(row)`` after each trained head.

    Returns
    -------
    AblationRun, ScreenMapsRun or ScreenStopRun
    """
    from sketchsim.experiments import require_torch

    plan.validate()
    torch = require_torch()
    torch.set_num_threads(1)
    from sketchsim.experiments import ablation

    if isinstance(plan, ScreenMapsPlan):
        rows = ablation.screen_maps(
            plan.scale, plan.ranks, plan.seeds, steps=plan.steps, lr=plan.lr, progress=progress
        )
        result = ScreenMapsRun(plan, rows)
    elif isinstance(plan, ScreenStopPlan):
        kernel = ("elu1", plan.kernel_rank) if plan.kernel_rank else None
        rows = ablation.screen_stops(plan.scales, plan.margins, plan.seeds, steps=plan.steps,
                                     lr=plan.lr, kernel=kernel, progress=progress)  # fmt: skip
        result = ScreenStopRun(plan, rows, ablation.pick_margin(rows))
    elif isinstance(plan, AblationPlan):
        got = ablation.run_ablation(plan.seeds, plan.steps, plan.triples, on_start, on_variant)
        result = AblationRun(plan, got["inputs"], got["baseline_mse"], got["rows"])
    else:
        raise TypeError(f"not an ablation plan: {type(plan).__name__}")
    if json_path:
        result.write(json_path)
    return result
