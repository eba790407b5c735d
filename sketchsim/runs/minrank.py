"""The minrank brackets as a library run: one row per width, resumable, rows as Dask tasks."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from sketchsim.certify.table_rank import nonneg_lower
from sketchsim.checkpoint import Checkpoint, unit_key
from sketchsim.errors import SketchsimError
from sketchsim.runs.clusters import open_cluster
from sketchsim.units import run_units

__all__ = ["MinrankPlan", "MinrankRun", "run", "row_problem", "nonneg_lower", "TRAIN_MAX_M"]

#: Widest m whose trained bounds run by default (one training at m = 7 takes minutes).
TRAIN_MAX_M = 6


@dataclass(frozen=True)
class MinrankPlan:
    """What ``sketchsim minrank`` brackets: ``r*(m)`` for every width, at length 3.

    Trained upper ends run up to ``train_max_m`` (``seeds`` x ``steps`` per
    rank); certificate families and weights go to ``out_dir`` when given.
    """

    widths: Sequence[int] = (2, 3, 4, 5, 6)
    n: int = 3
    causal: bool = False
    seeds: int = 1
    steps: int = 2000
    train_max_m: int = TRAIN_MAX_M
    out_dir: object = None

    def params(self) -> dict:
        """The parameters recorded in the result file."""
        return {
            "m": list(self.widths),
            "n": self.n,
            "causal": self.causal,
            "seeds": self.seeds,
            "steps": self.steps,
            "train_max_m": self.train_max_m,
        }

    def validate(self) -> None:
        """One-line errors for impossible settings."""
        from sketchsim.certify.table_rank import MINRANK_MAX_M

        if self.n != 3:
            raise SketchsimError(
                f"minrank covers length 3 (the certificate's N), got --n {self.n}", param="n"
            )
        bad = [w for w in self.widths if not 1 <= w <= MINRANK_MAX_M]
        if not self.widths or bad:
            raise SketchsimError(f"widths must be in 1..{MINRANK_MAX_M}, got {bad}", param="m")
        if not 0 <= self.train_max_m <= MINRANK_MAX_M:
            raise SketchsimError(
                f"--train-max-m must be in 0..{MINRANK_MAX_M} (0: train nothing), "
                f"got {self.train_max_m}",
                param="train_max_m",
            )
        for name, value in (("seeds", self.seeds), ("steps", self.steps)):
            if value < 1:
                raise SketchsimError(f"--{name} must be >= 1, got {value}", param=name)
        if self.seeds > 100 or self.steps > 10**6:
            raise SketchsimError(
                f"--seeds {self.seeds} / --steps {self.steps} exceed the limits 100 / "
                "1,000,000 (each try trains on all inputs)"
            )


@dataclass
class MinrankRun:
    """One row per width (JSON ``rows``), in the plan's order."""

    rows: list = field(default_factory=list)
    resumed: int = 0

    def to_dict(self) -> dict:
        return {"rows": self.rows}


# What the table and the plot read from a resumed row, with their JSON types.
_ROW_FIELDS = {
    "m": int,
    "exact_rank": int,
    "lower": dict,
    "construction": dict,
    "softmax": dict,
}
_PART_FIELDS = {
    "lower": {"certified_rank": int},
    "construction": {"rank": int, "name": str},
    "softmax": {"sufficient": float, "exact": float},
}
_TRAINED_FIELDS = {"rank": (int, None), "via": (str, None)}


def row_problem(row) -> str | None:
    """What is wrong with a resumed row (types, and the bracket order), or None."""
    from sketchsim.results import field_problem

    problem = field_problem(row, _ROW_FIELDS)
    if problem:
        return problem
    for part, fields in _PART_FIELDS.items():
        problem = field_problem(row[part], fields)
        if problem:
            return f"{part} {problem}"
    for kind in ("nonneg", "signed"):
        entry = row.get(f"trained_{kind}")
        problem = None if entry is None else field_problem(entry, _TRAINED_FIELDS)
        if problem:
            return f"trained_{kind} {problem}"
    m, lower, upper = row["m"], row["lower"]["certified_rank"], row["construction"]["rank"]
    if not 1 <= m <= 62 or row["exact_rank"] != 2**m:
        return f"has exact_rank {row['exact_rank']} for m = {m} (2^m expected)"
    if not 0 <= lower <= upper <= 2**m:
        return f"breaks certified <= construction <= 2^m ({lower}, {upper}, {2**m})"
    for kind in ("nonneg", "signed"):
        rank = (row.get(f"trained_{kind}") or {}).get("rank")
        if rank is not None and rank < lower:
            return f"has a trained {kind} head of rank {rank} below the certificate {lower}"
    rank = (row.get("trained_nonneg") or {}).get("rank")
    if rank is not None and rank < nonneg_lower(row):
        return f"has a trained nonneg head of rank {rank} below the sign-order bound"
    return None


def _same_except_widths(params: dict):
    def check(old) -> bool:
        return isinstance(old, dict) and all(old.get(k) == params[k] for k in params if k != "m")

    return check


def measure_row(plan: MinrankPlan, width: int) -> dict:
    """One width's row (a Dask task on a cluster)."""
    from sketchsim.experiments.table_heads import minrank_row

    return minrank_row(
        width,
        plan.seeds,
        plan.steps,
        plan.causal,
        train=width <= plan.train_max_m,
        out_dir=plan.out_dir,
    )


def run(
    plan: MinrankPlan,
    resume=None,
    cluster=None,
    progress: Callable[[int, int], None] | None = None,
    checkpoint=None,
) -> MinrankRun:
    """Every row of ``plan``; the result file is rewritten after each row.

    Parameters
    ----------
    plan : MinrankPlan
    resume : path-like, optional
        Result file to resume from: rows of the same settings (other widths
        allowed) are kept.
    cluster : None, str, ClusterSpec or distributed.Client
        One Dask task per width (workers need torch when heads are trained).
    progress : callable, optional
        ``progress(done, total)`` in rows.
    checkpoint : path-like, optional
        Rewrite this file after each row without resuming from it.
    """
    plan.validate()
    widths = sorted(set(plan.widths))
    train = any(w <= plan.train_max_m for w in widths)
    if train:
        from sketchsim.experiments import require_torch

        require_torch()
    params = plan.params() | {"m": widths}
    store = Checkpoint(
        resume if resume is not None else checkpoint,
        "minrank",
        params,
        "rows",
        lambda row, _file: unit_key(row["m"]),
        row_problem,
        match={"parameters": _same_except_widths(params)},
        label="row",
        mismatch="other parameters",
        resume=resume is not None,
    )
    rows = {w: store.get(unit_key(w)) for w in widths}
    rows.update({k: v for k, v in ((r["m"], r) for r in store.done.values()) if k not in rows})
    result = MinrankRun(resumed=sum(rows[w] is not None for w in widths))

    def finished(i: int, row: dict) -> None:
        rows[widths[i]] = row
        have = [rows[w] for w in sorted(rows) if rows[w] is not None]
        store.save(have, set(widths) <= {r["m"] for r in have})

    with open_cluster(cluster, need_torch=train) as (client, _spec):
        run_units(
            [(plan, w) for w in widths],
            measure_row,
            resumed=[rows[w] for w in widths],
            finished=finished,
            client=client,
            progress=progress,
        )
    result.rows = [rows[w] for w in widths]
    store.save([rows[w] for w in sorted(rows) if rows[w] is not None], True)
    return result
