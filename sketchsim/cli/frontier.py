"""``sketchsim families`` and ``sketchsim frontier``: family plug-ins and the bits frontier."""

from __future__ import annotations

import click

from sketchsim.cli import options as opt
from sketchsim.cli import render
from sketchsim.cli.app import main
from sketchsim.cli.cluster import cluster_option
from sketchsim.cli.paths import PlotPath
from sketchsim.runs.frontier import FrontierPlan

_D = opt.plan_default


@main.command()
def families():
    """List every input family found: built-ins, installed plug-ins."""
    from sketchsim.sketch.family_plugins import discover_families
    from sketchsim.tables.plugins import show_families

    show_families(render.console, discover_families())


@main.command()
@opt.protocol_option(_D(FrontierPlan, "protocols"))
@click.option("--vary", "vary_text", required=True, help="NAME=LO..HI, e.g. bits=1..16.")
@click.option("--q", "q_text", default=_D(FrontierPlan, "qs", joined=True), show_default=True,
              help="Comma-separated q.")  # fmt: skip
@click.option("--s", "s_text", default=_D(FrontierPlan, "ss", joined=True), show_default=True,
              help="Comma-separated s.")  # fmt: skip
@opt.family_option
@opt.samples_option(_D(FrontierPlan, "samples"), "Inputs per cell when (s+1)^q is above 2^20.")
@click.option(
    "--search",
    type=click.Choice(["auto", "bisect", "scan"]),
    default=_D(FrontierPlan, "search"),
    show_default=True,
    help="auto: bisect parameters declared monotone, scan the others.",
)
@opt.seed_option
@click.option("--prove", type=float, help="Seconds per cell: prove sampled trained cells.")
@opt.json_option("Write results here.")
@click.option("--plot", "plot_path", type=PlotPath(), help="Bits vs bound (PNG).")
@opt.resume_option("Keep cells already measured in --json.")
@opt.quiet_option
@cluster_option
def frontier(specs, vary_text, q_text, s_text, family_spec, samples, search, seed, prove,
             json_path, plot_path, resume, quiet, cluster):  # fmt: skip
    """Smallest parameter value decoded and decodable per (q, s), against the bound."""
    from sketchsim.runs.frontier import run as run_frontier
    from sketchsim.tables.frontier import show_frontier

    opt.check_resume(resume, json_path)
    plan = FrontierPlan(
        tuple(specs),
        vary_text,
        tuple(opt.parse_list(q_text, int, "--q", "integers")),
        tuple(opt.parse_list(s_text, int, "--s", "integers")),
        family_spec,
        samples,
        search,
        seed,
        prove,
    )
    with render.progress_bar("frontier", 1, not quiet, plain=cluster is not None) as update:
        result = run_frontier(
            plan,
            resume=json_path if resume else None,
            checkpoint=json_path,
            cluster=cluster,
            progress=update,
            log=lambda msg: render.err_console.print(f"[dim]{msg}[/dim]"),
        )
    show_frontier(render.console, result)
    if plot_path:
        from sketchsim.runs.plots import plot_frontier

        plot_frontier(result.cells, result.vary, plot_path)
        render.console.print(f"plot written to {plot_path}")
