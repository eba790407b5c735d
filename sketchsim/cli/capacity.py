"""The ``capacity`` command: saved models' transcript bits against q*log2(s+1)."""

from __future__ import annotations

import click
from rich.markup import escape
from rich.table import Table

from sketchsim.cli import render
from sketchsim.cli.app import main
from sketchsim.cli.cluster import cluster_option
from sketchsim.cli.options import json_option
from sketchsim.cli.paths import PlotPath
from sketchsim.errors import SketchsimError


def _num(v, fmt: str) -> str:
    return "-" if v is None else format(v, fmt)


@main.command()
@click.argument("folder", type=click.Path(file_okay=False))
@click.option(
    "--samples",
    type=click.IntRange(1),
    default=20_000,
    show_default=True,
    help="Inputs drawn when a family has more than 2^20.",
)
@json_option("Write rows and summary here.")
@click.option("--plot", "plot_path", type=PlotPath(), help="Accuracy vs bits.")
@cluster_option
def capacity(folder, samples, json_path, plot_path, cluster):
    """Smallest bits per state coordinate at which each saved model decodes every input.

    FOLDER holds weights files of `sketchsim sweep --suite capacity --save-weights`.
    Each runs in the sketch engine (protocol `trained`) at K = 1..32 bits per
    register; at the smallest K right on every input (all of them up to 2^20,
    else a sample) its transcript bits are set against the bound q*log2(s+1).
    With --cluster each file is a Dask task (FOLDER must be one the workers share).
    """
    from sketchsim.api import capacity as run

    with render.progress_bar("capacity", 1) as update:
        result = run(folder, samples, progress=update, cluster=cluster, json_path=json_path)
    if not result["rows"]:  # nothing measured: one line (the JSON lists why)
        bad = result["unreadable"]
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        raise SketchsimError(
            f"none of the {len(bad)} weights files in {folder} could be measured: "
            f"{bad[0]['weights']}: {bad[0]['reason']}{more}"
        )
    table = Table(title="trained models as sketches: smallest K decoding every input")
    cols = (
        "architecture",
        "seed",
        "q",
        "s",
        "float acc",
        "K",
        "transcript bits",
        "used bits",
        "entry entropy",
        "bound",
        "ratio",
        "mode",
        "correct",
    )
    for col in cols:
        table.add_column(col, justify="left" if col == "architecture" else "right")
    for r in result["rows"]:
        flag = " [red]![/red]" if r.get("accuracy_mismatch") else ""
        table.add_row(
            escape(r["architecture"]) + flag,
            str(r["seed"]),
            str(r["q"]),
            str(r["s"]),
            _num(r["float_accuracy"], ".3f"),
            _num(r["bits_per_coordinate"], "d"),
            _num(r["transcript_bits"], ",.0f"),
            f"{r['used_bits']:,.1f}",
            f"{r['entry_entropy_bits']:,.1f}",
            f"{r['bound_bits']:.1f}",
            _num(r["ratio"], ".2f") + ("x" if r["ratio"] else ""),
            r["mode"],
            f"{r['correct_fraction']:.4f}",
        )
    for bad in result["unreadable"]:
        table.add_row(escape(bad["weights"]), *["-"] * (len(cols) - 2), "[red]unreadable[/red]")
    render.console.print(table)
    _render_frontier(result["frontier"])
    for r in result["rows"]:
        if r.get("accuracy_mismatch"):
            render.console.print(
                f"[red]![/red] {escape(r['weights'])}: the engine at K = 32 is right on "
                f"{r['engine_accuracy_k32']:.3f} of the inputs where training recorded "
                f"{r['float_accuracy']:.3f}: the file may not run the model that was trained"
            )
    for bad in result["unreadable"]:
        render.console.print(f"unreadable: {escape(bad['weights'])}: {escape(bad['reason'])}")
    for ref in result["references"]:
        render.console.print(
            f"{ref['protocol']} on {ref['family']} q={ref['q']} s={ref['s']}: "
            f"{ref['transcript_bits']:,.0f} bits = {ref['ratio']:.2f}x the bound, "
            f"correct {ref['correct_fraction']:.4f}"
        )
    if plot_path:
        from sketchsim.experiments.capacity import plot_capacity

        plot_capacity(result, plot_path)
        render.console.print(f"plot written to {escape(str(plot_path))}")
    if result["unreadable"]:
        n, total = len(result["unreadable"]), len(result["unreadable"]) + len(result["rows"])
        raise SketchsimError(
            f"{n} of {total} weights files could not be measured (listed above"
            + (", and in the JSON file)" if json_path else ")")
        )


def _render_frontier(frontier: list[dict]) -> None:
    """The smallest decoding state per kind of architecture (sizes, K, seeds searched)."""
    if not any(f["models"] > 1 for f in frontier):
        return  # one model per kind: the table above says it all
    table = Table(title="smallest decoding state per architecture (over the folder's sizes)")
    for col in ("family", "q", "s", "kind", "models", "decoded", "best", "K", "bits", "bound",
                "ratio", "mode"):  # fmt: skip
        table.add_column(col, justify="left" if col in ("family", "kind", "best") else "right")
    for f in frontier:
        b = f["best"] or {}
        table.add_row(
            f["family"],
            str(f["q"]),
            str(f["s"]),
            escape(f["kind"]),
            str(f["models"]),
            str(f["decoded_models"]),
            f"r{b['rank']} d{b['value_width']} seed {b['seed']}" if b else "-",
            _num(b.get("bits_per_coordinate"), "d"),
            _num(b.get("transcript_bits"), ",.0f"),
            f"{f['bound_bits']:.1f}",
            _num(b.get("ratio"), ".2f") + ("x" if b else ""),
            _mode(b),
        )
    render.console.print(table)


def _mode(best: dict) -> str:
    """What "decoded" covered: every input, or a sample with its 95% error bound."""
    if not best:
        return "-"
    if best["mode"] == "exhaustive":
        return "every input"
    upper = best.get("error_rate_upper95")
    bound = f", error < {upper:.2g} at 95%" if upper is not None else ""
    return f"{best['inputs']:,} sampled{bound}"
