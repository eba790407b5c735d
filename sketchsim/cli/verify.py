"""``sketchsim verify``: exhaustive check of an attention construction."""

from __future__ import annotations

import math
import os
import sys

import click

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
    from sketchsim.heads.exhaustive import VerifyInterrupted
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
    from sketchsim.tables.verify import show_verify

    show_verify(render.console, res)
