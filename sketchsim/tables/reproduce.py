"""``sketchsim reproduce``: the paper's numbers beside ours, one row per claim."""

from __future__ import annotations

from rich.table import Table

__all__ = ["show_reproduce"]


def show_reproduce(console, rows, report) -> None:
    """The rows of :func:`sketchsim.api.reproduce` (claim, paper, measured, agrees);
    ``report``: the path of the report it wrote."""
    table = Table(title="paper vs measured", caption=f"report: {report}")
    for col in ("claim", "paper", "measured", "agrees"):
        table.add_column(col)
    for r in rows:
        color = "green" if r.agrees == "yes" else ("red" if r.agrees == "NO" else "yellow")
        table.add_row(r.claim, r.paper, r.measured, f"[{color}]{r.agrees}[/{color}]")
    console.print(table)
