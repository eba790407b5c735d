"""``sketchsim verify``: exhaustive check of an attention construction."""

from __future__ import annotations

import math
import os
import sys

import click
from rich.panel import Panel
from rich.table import Table

from sketchsim.cli import render
from sketchsim.cli.app import main
from sketchsim.cli.cluster import cluster_options
from sketchsim.cli.options import json_option, quiet_option
from sketchsim.runs.verify import DEFAULT_CONSTRUCTION

#: ``sketchsim.heads.attention.CONSTRUCTIONS`` (a test keeps the two equal); spelled out
#: here so that ``--help`` does not import NumPy.
CONSTRUCTION_NAMES = ("rank1", "softmax", "onehot")


def _at_least_one(ctx, param, value):
    if value is not None and value < 1:
        raise click.BadParameter(f"--{param.name} must be >= 1, got {value}")
    return value


def _finite_positive(ctx, param, value):
    if value is not None and not (math.isfinite(value) and value > 0):
        raise click.BadParameter(f"--{param.name} must be > 0 and finite, got {value}")
    return value


@main.command()
@click.option(
    "--m",
    "m",
    type=int,
    default=8,
    show_default=True,
    callback=_at_least_one,
    help="Token width m.",
)
@click.option(
    "--n",
    "n",
    type=int,
    default=3,
    show_default=True,
    callback=_at_least_one,
    help="Sequence length N.",
)
@click.option(
    "--construction",
    type=click.Choice(CONSTRUCTION_NAMES),
    default=DEFAULT_CONSTRUCTION,
    show_default=True,
    help="Head to check (THEORY section 3).",
)
@click.option(
    "--beta",
    type=float,
    default=2.0,
    show_default=True,
    callback=_finite_positive,
    help="Inverse temperature of softmax / onehot.",
)
@click.option("--causal", is_flag=True, help="Score only the final position.")
@json_option("Write results here.")
@quiet_option
@cluster_options
def verify(m, n, construction, beta, causal, json_path, quiet, cluster, state_dir):
    """Check a construction on every one of the 2^(m*n) inputs."""
    if cluster is None and "numpy" not in sys.modules:
        # verify never calls BLAS: NumPy's import need not start an OpenBLAS thread
        # per core (measured 70 ms of a 0.3 s run); a value the user set is kept
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from sketchsim import api
    from sketchsim.heads.verify import VerifyInterrupted
    from sketchsim.runs.verify import check

    check(m, n, cluster)  # before the progress bar
    total = 1 if cluster is not None else 1 << (m * n)
    label = f"verify {construction}" + (" (shards)" if cluster is not None else "")
    try:
        with render.progress_bar(label, total, not quiet, plain=cluster is not None) as update:
            res = api.verify(
                m, n, construction, beta, causal, update,
                cluster=cluster,
                state=state_dir,
                log=lambda msg: render.err_console.print(f"[dim]{msg}[/dim]"),
                json_path=json_path,
            )  # fmt: skip
    except VerifyInterrupted:  # the run wrote what was finished to --json, marked incomplete
        raise click.Abort() from None
    _render(res)


def _render(res):
    head = Panel.fit(
        f"m = {res.m}, N = {res.n}, construction [bold]{res.construction}[/bold]"
        + (f", beta = {res.beta:g}" if res.beta is not None else "")
        + f", feature rank r = {res.rank:,}"
        + (", causal final query" if res.causal else "")
        + (
            f"\nsoftmax exactness threshold ln(2(N-1)) = {res.softmax_threshold:.4f}"
            if res.softmax_threshold is not None
            else ""
        ),
        title="sketchsim verify",
    )
    table = Table()
    for col in ("inputs", "max |y - t|", "exact fraction", "verdict"):
        table.add_column(col, justify="right")
    table.add_row(
        f"{res.inputs:,}",
        f"{res.max_abs_error:.6g}",
        f"{res.exact_fraction:.6f}",
        render.verdict(res.passed, "exact", "fails"),
    )
    # highlight=False: the markup sets every colour, and rich's automatic number
    # highlighter costs 10 ms of regex compilation in a run that takes 0.3 s
    render.console.print(head, table, highlight=False)
    if res.counterexample:
        ce = res.counterexample
        rows = "\n".join(f"  x{k + 1} = {''.join(map(str, t))}" for k, t in enumerate(ce["tokens"]))
        render.console.print(
            f"[red]counterexample[/red] (input #{ce['index']}):\n{rows}\n"
            f"  position {ce['position']}: target {ce['target']}, output {ce['output']:.6g}",
            highlight=False,
        )
    else:
        render.console.print("[green]no counterexample[/green]", highlight=False)
    render.console.print(f"[dim]{res.seconds:.2f} s[/dim]", highlight=False)
