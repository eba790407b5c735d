"""``sketchsim bound``: the best certified rank per width, its growth fit and the
exported families, from a :class:`~sketchsim.runs.bound.BoundRun`."""

from __future__ import annotations

from rich.table import Table

from sketchsim.runs.bound import BOUND_SOFTMAX_EXACT_MAX_M

__all__ = ["show_bound"]


def show_bound(console, err_console, result, export_dir=None) -> None:
    """The rows and the growth fit; with ``export_dir``, each exported family's line (a
    family certifying less than its row claims goes to ``err_console``, loud)."""
    rows, realized, growth = result.rows, result.realized, result.growth
    slope = growth["slope"]
    table = Table(
        title="certified feature rank at N = 3 (heads with error < 1/2)",
        caption=(
            "softmax: ln 4 is a sufficient temperature (THEORY 3b); the exact threshold "
            f"beta* is bisected over all 2^(3m) inputs for m <= {BOUND_SOFTMAX_EXACT_MAX_M}\n"
            + (
                f"fit log2 r = {slope:.3f} m {growth['intercept']:+.2f} over {growth['points']} "
                f"widths: r >= 2^({slope:.3f} m); the 2^m endpoint has slope 1, the theorem "
                "states only 2^Omega(m)"
                if slope is not None
                else "too few widths with r >= 2 to fit a growth rate"
            )
        ),
    )
    cols = ("m", "best code", "words", "pairs", "bound", "certified r >=", "2^m")
    extra = ("family inputs", "realized r >=") if export_dir else ()
    for col in (*cols, "softmax beta sufficient", "softmax beta* exact", *extra):
        table.add_column(col, justify="left" if col == "best code" else "right")
    for k, row in enumerate(rows):
        table.add_row(
            str(row.m),
            row.code,
            f"{row.codewords:,}",
            f"{row.pairs:,}",
            f"{row.bound:.3f}",
            f"[bold]{row.certified_rank:,}[/bold]",
            f"{row.exact_rank:,}" if row.m <= 20 else f"2^{row.m}",
            f"{row.softmax_sufficient:.4f}",
            "-" if row.exact_softmax_threshold is None else f"{row.exact_softmax_threshold:.4f}",
            *(_realized_cells(realized[k]) if export_dir else ()),
        )
    console.print(table)
    if export_dir:
        _print_realized(console, err_console, realized, export_dir)


def _realized_cells(res) -> tuple[str, str]:
    mark = {"equal": "", "above": " (above)", "below": " [red](BELOW the claim)[/red]"}
    return f"{res.inputs:,}", f"[bold]{res.certified_rank:,}[/bold]{mark[res.status]}"


def _print_realized(console, err_console, realized, export_dir) -> None:
    """One line per exported family; a family that certifies less than its row claims is loud."""
    for res in realized:
        cert = res.certificate or {}
        proof = (
            f", proof {cert['file']} re-checked: r >= {cert['checked_rank']}"
            if "file" in cert
            else (f", no proof ({cert['skipped']})" if "skipped" in cert else "")
        )
        line = (
            f"m = {res.m}: {res.file} ({res.format}, {res.inputs:,} inputs, "
            f"{res.file_bytes / 1e6:,.1f} MB) certifies r >= {res.certified_rank} "
            f"(claimed {res.claimed_rank}) in {res.certify_seconds:.1f} s{proof}"
        )
        if res.status == "below":
            err_console.print(f"[red]MISMATCH[/red] {line}")
        else:
            console.print(line)
    console.print(f"families written to {export_dir}")
