"""``sketchsim minrank``: brackets of the smallest feature rank r*(m) (docs/theory.md)."""

from __future__ import annotations

import re

import click

from sketchsim.cli import render
from sketchsim.cli.app import main
from sketchsim.cli.options import check_resume, json_option, resume_option, split_list
from sketchsim.cli.options import plan_default as _D
from sketchsim.cli.paths import OutputPath, PlotPath
from sketchsim.runs.minrank import MinrankPlan


def parse_widths(text: str, limit: int) -> list[int]:
    """``"2..6"``, ``"4"`` or ``"2,4,6"`` as a list of widths within ``1..limit``."""
    text = text.strip()
    match = re.fullmatch(r"(\d+)\s*\.\.\s*(\d+)", text)
    try:
        if match:
            lo, hi = int(match.group(1)), int(match.group(2))
            widths = list(range(lo, hi + 1))
            if lo > hi:
                raise ValueError
        else:
            widths = [int(v) for v in split_list(text, "--m")]
    except ValueError:
        raise click.BadParameter(
            f"{text!r} is not a width range (use e.g. 2..6, 4 or 2,4,6)", param_hint="--m"
        ) from None
    bad = [w for w in widths if not 1 <= w <= limit]
    if bad:
        raise click.BadParameter(
            f"widths must be in 1..{limit} (2^(3m) inputs per exhaustive check), got {text}",
            param_hint="--m",
        )
    return sorted(set(widths))


@main.command()
@click.option("--m", "m_text", default=_D(MinrankPlan, "widths", joined=True), show_default=True,
              help="Widths: 2..6, 4 or 2,4.")  # fmt: skip
@click.option("--n", "n", type=int, default=_D(MinrankPlan, "n"), show_default=True,
              help="Length (only 3).")  # fmt: skip
@click.option("--causal", is_flag=True, help="Score only the final position.")
@click.option("--seeds", type=int, default=_D(MinrankPlan, "seeds"), show_default=True,
              help="Seeds per trained rank.")  # fmt: skip
@click.option("--steps", type=int, default=_D(MinrankPlan, "steps"), show_default=True,
              help="Training steps.")  # fmt: skip
@click.option(
    "--train-max-m",
    type=int,
    default=_D(MinrankPlan, "train_max_m"),
    show_default=True,
    help="Train heads only up to this width (m = 7 takes minutes per try).",
)
@click.option(
    "--out-dir",
    type=OutputPath(directory=True),
    default="minrank-out",
    show_default=True,
    help="Folder for certificate families and trained weights.",
)
@resume_option("Skip widths already in the --json file.")
@json_option("Write the rows here (rewritten after each row).", (".json",))
@click.option("--plot", type=PlotPath(), help="Brackets against m (PNG).")
def minrank(m_text, n, causal, seeds, steps, train_max_m, out_dir, resume, json_path, plot):
    """Bracket the smallest feature rank of one table head on all of ({0,1}^m)^3.

    Per m: the certified lower bound (best certificate, family saved), the
    sign-order lower bound for nonnegative heads (m <= 8), the smallest exact
    construction, the smallest trained nonnegative and signed
    heads (each re-checked on all 2^(3m) inputs, weights saved), 2^m, and the
    softmax temperatures.
    """
    from sketchsim.certify.table_rank import MINRANK_MAX_M
    from sketchsim.runs.minrank import MinrankPlan
    from sketchsim.runs.minrank import run as run_minrank

    check_resume(resume, json_path)
    plan = MinrankPlan(
        tuple(parse_widths(m_text, MINRANK_MAX_M)), n, causal, seeds, steps, train_max_m, out_dir
    )
    with render.progress_bar("minrank", len(plan.widths)) as update:
        result = run_minrank(
            plan, resume=json_path if resume else None, checkpoint=json_path, progress=update
        )
    from sketchsim.tables.minrank import show_minrank

    show_minrank(render.console, result.rows, causal)
    if plot:
        from sketchsim.runs.plots import plot_minrank

        plot_minrank(result.rows, plot)
