"""The certified bound's growth with m as a library run: one row per width, rows as Dask tasks."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from sketchsim.errors import SketchsimError
from sketchsim.runs.clusters import open_cluster
from sketchsim.units import run_units

__all__ = ["BoundPlan", "BoundRun", "run", "BOUND_SOFTMAX_EXACT_MAX_M", "BOUND_MAX_M"]

#: Widest m at which ``bound`` bisects the exact softmax threshold (2^(3m) inputs each try).
BOUND_SOFTMAX_EXACT_MAX_M = 6
#: Widest m ``bound`` accepts (random codes pack words into 64 bits).
BOUND_MAX_M = 64


@dataclass(frozen=True)
class BoundPlan:
    """Widths ``m, m + step, ..., to``; ``export`` builds and certifies each row's family there
    (``certificates``: also writes and re-checks a proof file per row)."""

    m: int
    to: int | None = None
    step: int = 1
    seed: int = 0
    export: object = None
    certificates: bool = False

    @property
    def widths(self) -> list[int]:
        return list(range(self.m, (self.m if self.to is None else self.to) + 1, self.step))

    def params(self) -> dict:
        """The parameters recorded in the result file."""
        return {
            "m": self.m,
            "to": self.m if self.to is None else self.to,
            "step": self.step,
            "seed": self.seed,
            "export": None if self.export is None else str(self.export),
            "certificates": self.certificates,
        }

    def validate(self) -> None:
        """One-line errors for impossible settings, before any work."""
        m, m2 = self.m, self.m if self.to is None else self.to
        if m < 2 or m2 < m or m2 > BOUND_MAX_M:
            raise SketchsimError(f"need 2 <= --m <= --to <= {BOUND_MAX_M}, got --m {m} --to {m2}")
        if self.step < 1:
            raise SketchsimError(f"--step must be >= 1, got {self.step}")
        if not 0 <= self.seed <= 2**63 - 1:
            raise SketchsimError(f"--seed must be in 0..2^63-1, got {self.seed}")
        if self.certificates and not self.export:
            raise SketchsimError("--certificates needs --export DIR")
        if self.export:
            from sketchsim.certify.realize import check_export_width

            check_export_width(m, m2)


@dataclass
class BoundRun:
    """Rows (:class:`sketchsim.certify.bounds.BoundRow`), realized families and the growth fit."""

    rows: list = field(default_factory=list)
    realized: list = field(default_factory=list)
    growth: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        """JSON-ready: every row (with its realized family), the fit, ``all_realized``."""
        payload: dict = {"rows": [asdict(r) for r in self.rows], "growth": self.growth}
        if self.realized:
            for entry, res in zip(payload["rows"], self.realized, strict=True):
                entry["realized"] = res.to_dict()
            payload["all_realized"] = all(r.status != "below" for r in self.realized)
        return payload


def bound_row(plan: BoundPlan, width: int):
    """``(row, realized or None)`` of one width (a Dask task on a cluster)."""
    from sketchsim.certify.bounds import best_bound
    from sketchsim.certify.softmax import exact_softmax_threshold

    exact = None
    if width <= BOUND_SOFTMAX_EXACT_MAX_M:
        exact = exact_softmax_threshold(width).exact
    row = best_bound(width, plan.seed, exact)
    if not plan.export:
        return row, None
    from sketchsim.certify.realize import realize_row

    return row, realize_row(row, plan.export, plan.seed, proof=plan.certificates)


def run(
    plan: BoundPlan,
    cluster=None,
    progress: Callable[[int, int], None] | None = None,
    json_path=None,
) -> BoundRun:
    """Every row of ``plan`` and the fitted growth ``log2 r = slope m + intercept``.

    ``cluster`` computes the rows as Dask tasks (the same rows); ``json_path``
    receives the result file.
    """
    from sketchsim.certify.bounds import fit_growth

    plan.validate()
    widths = plan.widths
    with open_cluster(cluster) as (client, _spec):
        rows = run_units([(plan, w) for w in widths], bound_row, client=client, progress=progress)
    out = dict(zip(widths, rows, strict=True))
    result = BoundRun(
        rows=[out[w][0] for w in widths],
        realized=[out[w][1] for w in widths] if plan.export else [],
    )
    result.growth = fit_growth([r.m for r in result.rows], [r.certified_rank for r in result.rows])
    if json_path:
        from sketchsim.results import result_payload, write_json_atomic

        write_json_atomic(json_path, result_payload("bound", plan.params(), result.to_dict()))
    return result
