"""``sketchsim frontier``: one row per (q, s) cell and the notes under the table, from a
:class:`~sketchsim.runs.frontier.FrontierRun`."""

from __future__ import annotations

from rich import box
from rich.table import Table

from sketchsim.tables.common import num, plain

__all__ = ["show_frontier"]


#: A few words per cell's (verdict, what it shows); :func:`_frontier_notes` explains them once.
_VERDICT_CELLS = {
    ("none", "neither"): "[red]none[/red]",
    ("proved", "decoded"): "[green]proved[/green]",
    ("not refuted", "decoded"): "[yellow]not refuted[/yellow]",
    ("proved", "decodable"): "[green]proved[/green]: [yellow]decodable[/yellow]",
    ("not refuted", "decodable"): "[yellow]not refuted: decodable[/yellow]",
    ("refuted", "decoded"): "[red]refuted[/red]",
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
            plain(v.name),  # a spec's file name: one line, no markup
            num(c["bound_bits"]),
            _value(c["search"], c["found"], c["value"]),
            _bits(c["declared_bits"], c["declared_ratio"]),
            _value(c["search"], c.get("decodable_found", False), c.get("decodable_value")),
            _bits(c.get("decodable_declared_bits"), c.get("decodable_declared_ratio")),
            f"{c['inputs']:,}",  # all of them when "proved", a sample when "not refuted"
            search,
            _VERDICT_CELLS[v.verdict, v.shows],
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
    :class:`~sketchsim.runs.frontier.FrontierNotes`), once for all cells: what each kind
    of cell proved (decoded, decodable only, neither) and what it rests on."""
    lines = []
    kinds = notes.kinds
    if ("proved", "decoded") in kinds:
        lines.append(
            "proved: every input of the family was run; decoded: at the decoded value the "
            "protocol's own readout is right on every input, and the decodable value's "
            "transcripts separate every two answer vectors"
        )
    if ("proved", "decodable") in kinds:
        lines.append(
            "proved: decodable: every input of the family was run; the decodable value's "
            "transcripts separate every two answer vectors (some decoder exists), but no value "
            "in the range is decoded: the protocol's own readout is wrong on some input"
        )
    for n, error_upper, power in notes.sampled:
        lines.append(
            f"not refuted ({n:,} sampled inputs): a decoded value is correct on the "
            f"{n:,} sampled inputs (error rate < {error_upper:.2g} at 95%) and a "
            f"decodable value shows no collision among them (collision check reach "
            f"{'-' if power is None else f'{power:.2g}'}); neither is proved for the other inputs"
        )
    if ("refuted", "decoded") in kinds:
        lines.append(
            "refuted: a decoded value is right on its sample, and prove found an input of the "
            "family it answers wrong (the cell's prove.counterexample in the JSON)"
        )
    if ("proved", "decoded") in kinds and not notes.proved:
        lines.append(
            "proved (sampled cell): prove decided the decoded value right on every input "
            "(docs/theory.md 5.5)"
        )
    if ("not refuted", "decodable") in kinds:
        lines.append(
            "not refuted: decodable: the decodable value shows no collision among the "
            "sampled inputs, but no value in the range is decoded: the protocol's own readout "
            "is wrong on some sampled input"
        )
    if notes.missing:
        lines.append(
            "none in a value column: no value in the range is decoded (resp. decodable)"
            + (
                "; verdict none: neither, and each such cell's decodable_reason in the JSON "
                "says how the last value was refuted"
                if ("none", "neither") in kinds
                else ""
            )
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
