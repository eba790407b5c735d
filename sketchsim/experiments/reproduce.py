"""The trained half of ``sketchsim reproduce``: its settings, its rows and the sweep rows.

:class:`Settings` holds both trained suites' plans and the sizes of the rest,
:class:`Row` is one line of the report, and :func:`sweep_rows` trains the
witness and OOD sweeps (torch) and turns them into rows.  The command itself,
which also runs the construction checks, the certificate, the transcript
bound and the bound's growth through their library runs and writes the
report, is :func:`sketchsim.runs.reproduce.reproduce`.
"""

from __future__ import annotations

from dataclasses import dataclass

from sketchsim.config import PAPER
from sketchsim.experiments.plan import SuitePlan, default_plan
from sketchsim.experiments.stats import MIN_SEEDS_FOR_INTERVAL
from sketchsim.experiments.suite_runs import run_plan
from sketchsim.results import write_json_atomic

__all__ = ["Row", "Settings", "sweep_rows", "yes_no", "SOFTMAX_OOD_ACCURACY"]

#: Test exact-sequence accuracy every softmax seed must reach at every OOD scale.
SOFTMAX_OOD_ACCURACY = 0.99


@dataclass
class Settings:
    """What a run trains and measures: the two trained suites' plans and the sizes of the rest.

    ``witness`` and ``ood`` are :class:`~sketchsim.experiments.plan.SuitePlan` objects,
    by default :func:`~sketchsim.experiments.plan.default_plan` (the plans
    ``sketchsim sweep`` runs without flags).  A row whose claim is about every
    seed, or about a transition read off 95% intervals, needs at least
    :data:`~sketchsim.experiments.stats.MIN_SEEDS_FOR_INTERVAL` seeds; with fewer
    (``--quick``) it says "not measured in quick mode" and the runs it alone
    needs are skipped.
    """

    witness: SuitePlan
    ood: SuitePlan
    samples: int
    bound_to: int
    threads: int = 1

    @classmethod
    def of(cls, quick: bool) -> Settings:
        """The full run, or ``--quick`` (under a minute on 2 idle CPU cores, docs/results.md)."""
        return cls(
            witness=default_plan("witness", quick),
            ood=default_plan("ood", quick),
            samples=20_000 if quick else 100_000,
            bound_to=20 if quick else 28,
        )

    def plans(self) -> tuple[SuitePlan, SuitePlan]:
        """Both plans with this run's torch threads."""
        return self.witness.with_(threads=self.threads), self.ood.with_(threads=self.threads)


@dataclass
class Row:
    """One line of the side-by-side table."""

    claim: str
    paper: str
    measured: str
    agrees: str


def _not_measured(claim: str, paper: str, seeds: int) -> Row:
    return Row(
        claim,
        paper,
        f"not measured in quick mode (needs >= {MIN_SEEDS_FOR_INTERVAL} seeds, this run has "
        f"{seeds}; run without --quick)",
        "-",
    )


def sweep_rows(out, cfg, family, bound, log, device, client=None):
    """The sweep rows, and every training run of both sweeps (resumed ones included).

    ``family`` is the witness family the witness sweep is scored on, ``bound``
    its certified rank; the sweeps resume from their files in ``out`` and,
    with a Dask ``client``, train as cluster tasks.  Without torch: one row
    saying so and no runs.
    """
    try:
        import torch  # noqa: F401
    except ImportError:
        return [Row("trained heads", "see paper", "skipped: torch is not installed", "-")], []
    witness, ood = cfg.plans()
    rows, runs = _witness_rows(out, witness, family, bound, log, device, client)
    ood_rows, ood_runs = _ood_rows(out, ood, log, device, client)
    return rows + ood_rows, runs + ood_runs


def _witness_rows(out, plan, family, bound, log, device, client):
    from sketchsim.experiments.sweep_summary import plot_sweep

    log("witness sweep (training)")
    soft_ok = plan.softmax_seeds >= MIN_SEEDS_FOR_INTERVAL
    if not soft_ok:  # the softmax row needs seeds: its runs are not made at all
        plan = plan.with_(models=tuple(m for m in plan.models if m != "softmax"))
    res = run_plan(plan, out / "sweep_witness.json", True, device, family, client)
    seq, mx = res.summary, res.max_abs_error
    plot_sweep(seq, out / "sweep_witness.png", "sequence error", "witness suite", bound)
    kern = [(a, b) for a, b in zip(seq, mx, strict=True) if a["model"] == "kernel"]
    below = [b["min"] for a, b in kern if a["rank"] < PAPER["witness_lower_bound"]]
    exact32 = [a["max"] for a, _ in kern if a["rank"] == PAPER["witness_exact_rank"]]
    all_exact = [a["rank"] for a, _ in kern if a["max"] == 0.0]
    soft = [r for r in res.runs if r["spec"]["model"] == "softmax"]
    rows = [
        Row(
            f"trained heads with r < {PAPER['witness_lower_bound']} on the witness suite",
            f"error > {PAPER['witness_fail_error_below_bound']:.2f}",
            f"smallest max abs error over r < 8 and {plan.seeds} seed(s): {min(below):.2f}"
            if below
            else "not run",
            yes_no(bool(below) and min(below) > PAPER["witness_fail_error_below_bound"]),
        ),
        Row(
            f"r = {PAPER['witness_exact_rank']} on the witness suite",
            "exact",
            f"worst sequence error over {plan.seeds} seed(s): {exact32[0]:.3f}"
            if exact32
            else "not run",
            yes_no(bool(exact32) and exact32[0] == 0.0),
        ),
    ]
    claim = "smallest trained rank exact on every seed (table map)"
    paper = (
        f"r = {PAPER['witness_exact_rank']} solves it; bound r >= {PAPER['witness_lower_bound']}"
    )
    if plan.seeds < MIN_SEEDS_FOR_INTERVAL:
        rows.append(_not_measured(claim, paper, plan.seeds))
    else:
        rows.append(
            Row(
                claim,
                paper,
                f"r = {min(all_exact)} (ranks tried: {', '.join(map(str, plan.ranks))}; "
                f"{plan.seeds} seeds; certified r >= {bound})"
                if all_exact
                else "none",
                yes_no(bool(all_exact) and min(all_exact) >= bound),
            )
        )
    claim, paper = "dense softmax on the witness suite", "exact on every seed"
    if not soft_ok:
        rows.append(_not_measured(claim, paper, plan.softmax_seeds))
    else:
        soft_err = [r["sequence_error"] for r in soft]
        rows.append(
            Row(
                claim,
                paper,
                f"sequence error {', '.join(f'{e:.3f}' for e in soft_err)} over {len(soft)} "
                f"seed(s), max error {max(r['max_abs_error'] for r in soft):.2f} (learned "
                f"from random init on {plan.triples:,} random triples, never on the family)",
                yes_no(bool(soft) and max(soft_err) == 0.0),
            )
        )
    write_json_atomic(out / "summary_witness.json", res.to_dict() | {"max_abs_error": mx})
    return rows, res.runs


def _ood_rows(out, plan, log, device, client):
    from sketchsim.experiments.sweep_summary import plot_sweep

    claims = [
        (
            f"OOD transition point (smallest r whose 95% interval of test accuracy clears "
            f"{plan.accuracy:g})",
            "r = " + " -> ".join(map(str, PAPER["ood_transition_ranks"])) + " as scale grows",
        ),
        ("dense softmax on the OOD suite", "exact on every seed"),
    ]
    if min(plan.seeds, plan.softmax_seeds) < MIN_SEEDS_FOR_INTERVAL:
        log("ood sweep: skipped (quick mode has too few seeds for its verdicts)")
        return [_not_measured(c, p, min(plan.seeds, plan.softmax_seeds)) for c, p in claims], []
    log("ood sweep (training)")
    res = run_plan(plan, out / "sweep_ood.json", True, device, None, client)
    plot_sweep(
        res.summary,
        out / "sweep_ood.png",
        "test exact-sequence accuracy",
        "ood suite",
        threshold=plan.accuracy,
    )
    write_json_atomic(out / "summary_ood.json", res.to_dict())
    soft = [a for a in res.summary if a["model"] == "softmax"]
    return [
        _ood_transition_row(res.summary, plan, res.transition, res.trend),
        Row(
            *claims[1],
            ", ".join(f"{a['scale']}: {a['min']:.4f}" for a in soft)
            + f" (worst test accuracy of {plan.softmax_seeds} seeds)",
            _softmax_ood_verdict(soft),
        ),
    ], res.runs


def _softmax_ood_verdict(soft_acc: list[dict]) -> str:
    """``yes`` when every seed reaches 0.99 test accuracy at every scale, else
    ``NO`` naming the scales and seeds that miss it."""
    short = [a for a in soft_acc if a["min"] < SOFTMAX_OOD_ACCURACY]
    if soft_acc and not short:
        return "yes"
    where = ", ".join(f"{a['scale']} (worst seed {a['min']:.4f})" for a in short)
    return f"NO: below {SOFTMAX_OOD_ACCURACY} at {where or 'no scale run'}; see docs/results.md"


def _ood_transition_row(summary: list[dict], plan, transition: dict, trend: list[dict]) -> Row:
    """The OOD transition per map and scale, and the threshold-free trend with scale.

    Per scale: the smallest rank whose 95% interval of test accuracy clears
    ``plan.accuracy``, with that interval, and the bracket's lower end (the
    smallest rank whose interval reaches it); or the best mean when no rank
    clears it.  Per rank: the slope of test accuracy per bit of ``m`` with its
    95% interval (``trend``, :func:`~sketchsim.experiments.stats.scale_trend`).
    ``yes`` for a map when its transition grows with the scale *and* its
    accuracy falls with ``m`` at every rank (every slope's interval below 0),
    otherwise ``NO`` with the reason.
    """
    from sketchsim.experiments.stats import falls_with_scale
    from sketchsim.experiments.suites import parse_scales

    parts = []
    names = [f"{m}:{p}:{t}" for m, p, t in parse_scales(plan.scales)]
    found = {}
    for fmap in plan.feature_maps:
        cells = []
        for scale in names:
            curve = sorted(
                (a for a in summary if a["scale"] == scale and a["feature_map"] == fmap),
                key=lambda a: a["rank"],
            )
            key = scale if len(plan.feature_maps) == 1 else f"{scale} ({fmap})"
            rank = transition.get(key, {}).get("rank")
            found.setdefault(fmap, []).append(rank)
            hit = next((a for a in curve if a["rank"] == rank), None)
            if hit is not None:
                low = transition[key]["low"]
                cells.append(
                    f"{scale}: r = {rank} ({hit['mean']:.3f}, {hit['ci_low']:.3f}-"
                    f"{hit['ci_high']:.3f}), bracket r = {low}-{rank}"
                )
            elif curve:
                top = max(curve, key=lambda a: a["mean"])
                cells.append(f"{scale}: none (best mean {top['mean']:.3f} at r = {top['rank']})")
        ranks = f"{min(plan.ranks)}-{max(plan.ranks)}"
        slopes = [c for c in trend if c["feature_map"] == fmap]
        parts.append(
            f"{fmap} (mean and 95% interval of {plan.seeds} seeds, r = {ranks}): "
            + "; ".join(cells)
            + "; accuracy per bit of m at fixed r (95% interval): "
            + ", ".join(f"r = {c['rank']}: {_slope(c)}" for c in slopes)
        )
    from sketchsim.experiments.sweep_summary import transition

    means = transition(summary, plan.accuracy)  # where the seed means alone cross
    parts.append(
        "seed means cross it at r = "
        + ", ".join(f"{r if r is not None else 'none'}" for r in means.values())
    )
    grows = [f for f, ranks in found.items() if _grows(ranks)]
    falls = [f for f in found if falls_with_scale(trend, f)]
    both = [f for f in grows if f in falls]
    if both:
        agrees = (
            f"yes ({', '.join(both)}): the transition grows with the scale and accuracy at "
            "every fixed rank falls with m"
        )
    else:
        why = []
        if not grows:
            why.append("the interval transition does not grow with the scale")
        if not falls:
            why.append("accuracy does not fall with m at every rank")
        agrees = f"NO: {'; '.join(why) or 'no map does both'} (see docs/results.md)"
    return Row(
        f"OOD transition point (smallest r whose 95% interval of test accuracy clears "
        f"{plan.accuracy:g})",
        "r = " + " -> ".join(map(str, PAPER["ood_transition_ranks"])) + " as scale grows",
        " / ".join(parts),
        agrees,
    )


def _slope(cell: dict) -> str:
    """``-0.010 (-0.017 to -0.003)``: a slope and its 95% interval, or why it has none."""
    if cell["ci_low"] is None:
        return "no interval"
    return f"{cell['slope']:+.4f} ({cell['ci_low']:+.4f} to {cell['ci_high']:+.4f})"


def _grows(ranks: list) -> bool:
    """A transition at each of >= 3 scales, never smaller at a larger one, larger at the end."""
    if len(ranks) < 3 or any(r is None for r in ranks):
        return False
    return all(a <= b for a, b in zip(ranks, ranks[1:], strict=False)) and ranks[-1] > ranks[0]


def yes_no(ok: bool) -> str:
    """The ``agrees`` word of a row whose check passed (``yes``) or failed (``NO``)."""
    return "yes" if ok else "NO"
