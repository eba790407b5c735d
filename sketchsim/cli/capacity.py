"""The ``capacity`` command: saved models' transcript bits against q*log2(s+1)."""

from __future__ import annotations

import click
from rich.markup import escape

from sketchsim.cli import render
from sketchsim.cli.app import main
from sketchsim.cli.cluster import cluster_option
from sketchsim.cli.options import json_option
from sketchsim.cli.paths import PlotPath
from sketchsim.errors import SketchsimError


@main.command()
@click.argument("folder", type=click.Path(file_okay=False))
@click.option(
    "--samples",
    type=click.IntRange(1),
    default=20_000,
    show_default=True,
    help="Inputs drawn when a family has more than 2^20.",
)
@click.option(
    "--rounding",
    type=click.Choice(["every", "cut"]),
    default="every",
    show_default=True,
    help="Causal models: round the state after every token, or only the transcript at the cut.",
)
@click.option("--prove", type=float, help="Seconds per file: prove sampled rows at their K.")
@json_option("Write rows and summary here.")
@click.option("--plot", "plot_path", type=PlotPath(), help="Accuracy vs bits.")
@cluster_option
def capacity(folder, samples, rounding, prove, json_path, plot_path, cluster):
    """Smallest bits per state coordinate at which each saved model decodes every input.

    FOLDER holds weights files of `sketchsim sweep --suite capacity --save-weights`.
    Each runs in the sketch engine (protocol `trained`) at K = 1..32 bits per
    register; at the smallest K right on every input (all of them up to 2^20,
    else a sample) its transcript bits are set against the bound q*log2(s+1).
    With --cluster each file is a Dask task (FOLDER must be one the workers share).
    """
    from sketchsim.api import capacity as run

    with render.progress_bar("capacity", 1) as update:
        result = run(folder, samples, progress=update, cluster=cluster, json_path=json_path,
                     rounding=rounding, prove=prove)  # fmt: skip
    if not result["rows"]:  # nothing measured: one line (the JSON lists why)
        bad = result["unreadable"]
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        raise SketchsimError(
            f"none of the {len(bad)} weights files in {folder} could be measured: "
            f"{bad[0]['weights']}: {bad[0]['reason']}{more}"
        )
    from sketchsim.tables.capacity import show_capacity

    show_capacity(render.console, result)
    if plot_path:
        from sketchsim.runs.capacity import plot_capacity

        plot_capacity(result, plot_path)
        render.console.print(f"plot written to {escape(str(plot_path))}")
    if result["unreadable"]:
        n, total = len(result["unreadable"]), len(result["unreadable"]) + len(result["rows"])
        raise SketchsimError(
            f"{n} of {total} weights files could not be measured (listed above"
            + (", and in the JSON file)" if json_path else ")")
        )
