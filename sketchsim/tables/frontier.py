"""``sketchsim frontier``: one row per (q, s) cell and the notes under the table, from a
:class:`~sketchsim.runs.frontier.FrontierRun`."""

from __future__ import annotations

from rich import box
from rich.table import Table

from sketchsim.tables.common import num

__all__ = ["show_frontier"]


#: A few words per cell's verdict; :func:`_frontier_notes` explains them once.
_VERDICT_CELLS = {
    "none": "[red]none[/red]",
    "proved": "[green]proved[/green]",
    "not refuted": "[yellow]not refuted[/yellow]",
}


def show_frontier(console, result) -> None:
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
            num(c["bound_bits"]),
            _value(c["search"], c["found"], c["value"]),
            _bits(c["declared_bits"], c["declared_ratio"]),
            _value(c["search"], c.get("decodable_found", False), c.get("decodable_value")),
            _bits(c.get("decodable_declared_bits"), c.get("decodable_declared_ratio")),
            f"{c['inputs']:,}",  # all of them when "proved", a sample when "not refuted"
            search,
            _VERDICT_CELLS[v.verdict],
        )
    console.print(table)
    for line in _frontier_notes(result.notes()):
        console.print(f"[dim]{line}[/dim]")


def _bits(bits, ratio) -> str:
    """Declared bits and their ratio to the bound in one cell: ``22.00 (5.50x)``."""
    if bits is None:
        return "-"
    return num(bits) + ("" if ratio is None else f" ({ratio:.2f}x)")


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
