"""``sketchsim families`` and ``sketchsim frontier``: family plug-ins and the bits frontier."""

from __future__ import annotations

import click
from rich import box
from rich.table import Table

from sketchsim.cli import render
from sketchsim.cli.app import main
from sketchsim.cli.cluster import cluster_option
from sketchsim.cli.options import check_resume, json_option, parse_list, quiet_option, resume_option
from sketchsim.cli.paths import PlotPath


@main.command()
def families():
    """List every input family found: built-ins, installed plug-ins."""
    from sketchsim.sketch.family_plugins import discover_families

    table = Table(title="input families")
    for col in ("name", "source", "description", "parameters", "default protocols"):
        table.add_column(col)
    for item in discover_families():
        if item.family is None:
            table.add_row(item.name, item.source, f"[red]{item.error}[/red]", "", "")
            continue
        fam = item.family
        params = ", ".join(p.describe() for p in fam.params) or "-"
        table.add_row(
            item.name, item.source, fam.description, params, ", ".join(fam.default_protocols)
        )
    render.console.print(table)


@main.command()
@click.option(
    "--protocol",
    "specs",
    multiple=True,
    default=("kernel",),
    show_default=True,
    help="NAME[:k=v,...], path/file.py:NAME[:...] or pkg.module:NAME[:...]; repeatable.",
)
@click.option("--vary", "vary_text", required=True, help="NAME=LO..HI, e.g. bits=1..16.")
@click.option("--q", "q_text", default="4,8,16", show_default=True, help="Comma-separated q.")
@click.option("--s", "s_text", default="3,7", show_default=True, help="Comma-separated s.")
@click.option(
    "--family",
    "family_spec",
    default="hard",
    show_default=True,
    help="Input family: NAME[:k=v,...] (see `sketchsim families`).",
)
@click.option(
    "--samples",
    type=int,
    default=20_000,
    show_default=True,
    help="Inputs drawn per cell when (s+1)^q is above 2^20.",
)
@click.option(
    "--search",
    type=click.Choice(["auto", "bisect", "scan"]),
    default="auto",
    show_default=True,
    help="auto: bisect parameters declared monotone, scan the others.",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Bit layout and sampling.")
@json_option("Write results here.")
@click.option("--plot", "plot_path", type=PlotPath(), help="Bits vs bound (PNG).")
@resume_option("Keep cells already measured in --json.")
@quiet_option
@cluster_option
def frontier(
    specs,
    vary_text,
    q_text,
    s_text,
    family_spec,
    samples,
    search,
    seed,
    json_path,
    plot_path,
    resume,
    quiet,
    cluster,
):
    """Smallest parameter value decoded and decodable per (q, s), against the bound."""
    from sketchsim.runs.frontier import FrontierPlan
    from sketchsim.runs.frontier import run as run_frontier

    check_resume(resume, json_path)
    plan = FrontierPlan(
        tuple(specs),
        vary_text,
        tuple(parse_list(q_text, int, "--q", "integers")),
        tuple(parse_list(s_text, int, "--s", "integers")),
        family_spec,
        samples,
        search,
        seed,
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
    _render_frontier(result)
    if plot_path:
        from sketchsim.runs.plots import plot_frontier

        plot_frontier(result.cells, result.vary, plot_path)
        render.console.print(f"plot written to {plot_path}")


def _num(x, fmt: str = ",.2f") -> str:
    return "-" if x is None else format(x, fmt)


def _render_frontier(result) -> None:
    """Print a :class:`~sketchsim.runs.frontier.FrontierRun`: the values it holds."""
    vary = result.vary
    table = Table(
        box=box.SIMPLE_HEAD,
        padding=0,  # one space between columns (the box's divider)
        pad_edge=False,
        title=f"bits frontier: smallest {vary.name} in {vary.lo}..{vary.hi}, decoded and decodable",
        caption="decoded: the protocol's own readout right on every input run; decodable: no "
        "two inputs with different answers share a transcript; (x bound): declared bits / "
        "q*log2(s+1); verdict: below the table",
    )
    cols = (
        "q",
        "s",
        "protocol",
        "bound",
        f"{vary.name} decoded",
        "declared (x bound)",
        f"{vary.name} decodable",
        "declared (x bound) ",
        "inputs",
        "search",
        "verdict",
    )
    for col in cols:
        left = col in ("protocol", "search", "verdict")
        table.add_column(
            col.strip().replace(" ", "\n"),  # one word a line: narrow columns, cells on one line
            justify="left" if left else "right",
            no_wrap=True,
            min_width=max(map(len, col.split())),
        )
    for v in result.verdicts():
        c = v.cell
        search = {"bisection": "bisect"}.get(c["search"], c["search"])
        if v.not_monotone:
            search += "[yellow]*[/yellow]"
        table.add_row(
            str(c["q"]),
            str(c["s"]),
            v.name,
            _num(c["bound_bits"]),
            _value(c["search"], c["found"], c["value"]),
            _bits(c["declared_bits"], c["declared_ratio"]),
            _value(c["search"], c.get("decodable_found", False), c.get("decodable_value")),
            _bits(c.get("decodable_declared_bits"), c.get("decodable_declared_ratio")),
            f"{c['inputs']:,}",  # all of them when "proved", a sample when "not refuted"
            search,
            _VERDICT_CELLS[v.verdict],
        )
    render.console.print(table)
    for line in _frontier_notes(result.notes()):
        render.console.print(f"[dim]{line}[/dim]")


def _bits(bits, ratio) -> str:
    """Declared bits and their ratio to the bound in one cell: ``22.00 (5.50x)``."""
    if bits is None:
        return "-"
    return _num(bits) + ("" if ratio is None else f" ({ratio:.2f}x)")


#: A few words per cell's verdict; :func:`_frontier_notes` explains them once.
_VERDICT_CELLS = {
    "none": "[red]none[/red]",
    "proved": "[green]proved[/green]",
    "not refuted": "[yellow]not refuted[/yellow]",
}


def _frontier_notes(notes) -> list[str]:
    """The long explanation of the table's verdicts (a
    :class:`~sketchsim.runs.frontier.FrontierNotes`), once for all cells."""
    lines = []
    if notes.proved:
        lines.append(
            "proved: every input of the family was run; the decoded value is correct on every "
            "input and the decodable value's transcripts separate every two answer vectors"
        )
    for n, error_upper, power in notes.sampled:
        lines.append(
            f"not refuted ({n:,} sampled inputs): the decoded value is correct on the "
            f"{n:,} sampled inputs (error rate < {error_upper:.2g} at 95%) and the "
            f"decodable value shows no collision among them (collision check reach "
            f"{'-' if power is None else f'{power:.2g}'}); neither is proved for the other inputs"
        )
    if notes.missing:
        lines.append(
            "none: no value in the range is correct (decoded) or decodable; each such cell's "
            "decodable_reason in the JSON says how the last value was refuted"
        )
    if notes.not_monotone:
        lines.append("scan*: the scanned verdicts are not monotone in the parameter")
    if notes.fixed:
        lines.append("fixed: the protocol has no such parameter; measured once")
    return lines


def _value(search: str, found: bool, value) -> str:
    if search == "fixed":  # the protocol has no such parameter: measured once
        return "-" if found else "[red]no[/red]"
    return str(value) if found else "[red]none[/red]"
