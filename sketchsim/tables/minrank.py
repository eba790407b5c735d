"""``sketchsim minrank``: the brackets on the smallest feature rank per width, from the
rows of a :class:`~sketchsim.runs.minrank.MinrankRun`."""

from __future__ import annotations

from rich.table import Table

from sketchsim.runs.minrank import nonneg_lower

__all__ = ["show_minrank"]


def _fmt(value) -> str:
    return "-" if value is None else f"{value:,}"


def _trained(row, kind) -> str:
    entry = row.get(f"trained_{kind}")
    if entry is None:
        return "not trained"
    if entry["rank"] is None:
        return f"none < {row['construction']['rank']}"
    return f"{entry['rank']}" + (" (nonneg)" if entry.get("via") else "")


def show_minrank(console, rows, causal) -> None:
    """One row per width: the certified, sign-order, constructed and trained brackets."""
    table = Table(
        title="smallest feature rank of one table head, N = 3"
        + (" (causal final query)" if causal else ""),
        caption="every upper bound was checked on all 2^(3m) inputs; the certificate holds "
        "for every head with error < 1/2; softmax beta* bisected over all inputs",
    )
    cols = (
        "m",
        "certified r* >=",
        "nonneg r* >= (sign orders)",
        "construction r* <=",
        "trained r* <=",
        "trained r_signed <=",
        "2^m",
        "softmax beta suff.",
        "softmax beta* exact",
    )
    for col in cols:
        table.add_column(col, justify="right")
    for r in rows:
        table.add_row(
            str(r["m"]),
            f"[bold]{r['lower']['certified_rank']}[/bold]",
            str(nonneg_lower(r)) if r.get("lower_nonneg") else "-",
            f"{r['construction']['rank']:,} ({r['construction']['name']})",
            _trained(r, "nonneg"),
            _trained(r, "signed"),
            _fmt(r["exact_rank"]),
            f"{r['softmax']['sufficient']:.4f}",
            f"{r['softmax']['exact']:.4f}",
        )
    console.print(table)
