"""``sketchsim capacity``: each weights file's smallest decoding K and transcript bits, the
smallest decoding state per architecture, and the notes under them."""

from __future__ import annotations

from rich.table import Table

from sketchsim.tables.common import num, plain

__all__ = ["show_capacity"]


def show_capacity(console, result: dict) -> None:
    """The rows of :func:`sketchsim.api.capacity`'s result: one per file (unreadable
    files last), the frontier when a kind has several models, and the notes."""
    cut = any(r.get("rounding") == "cut" for r in result["rows"])
    table = Table(
        title="trained models as sketches: smallest K decoding every input",
        caption="causal models: only the transcript rounded, at the cut" if cut else None,
    )
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
        "evidence",
        "correct",
    )
    for col in cols:
        table.add_column(col, justify="left" if col == "architecture" else "right")
    for r in result["rows"]:
        flag = " [red]![/red]" if r.get("accuracy_mismatch") else ""
        table.add_row(
            plain(r["architecture"]) + flag,
            str(r["seed"]),
            str(r["q"]),
            str(r["s"]),
            num(r["float_accuracy"], ".3f"),
            num(r["bits_per_coordinate"], "d"),
            num(r["transcript_bits"], ",.0f"),
            f"{r['used_bits']:,.1f}",
            f"{r['entry_entropy_bits']:,.1f}",
            f"{r['bound_bits']:.1f}",
            num(r["ratio"], ".2f") + ("x" if r["ratio"] else ""),
            r.get("evidence", r["mode"]),
            f"{r['correct_fraction']:.4f}",
        )
    for bad in result["unreadable"]:
        table.add_row(plain(bad["weights"]), *["-"] * (len(cols) - 2), "[red]unreadable[/red]")
    console.print(table)
    _show_frontier(console, result["frontier"])
    for r in result["rows"]:
        if r.get("accuracy_mismatch"):
            console.print(
                f"[red]![/red] {plain(r['weights'])}: the engine at K = 32 is right on "
                f"{r['engine_accuracy_k32']:.3f} of the inputs where training recorded "
                f"{r['float_accuracy']:.3f}: the file may not run the model that was trained"
            )
    for r in result["rows"]:  # what the row owes to its recipe, not to training (#63)
        if r.get("recipe"):
            console.print(f"recipe: {plain(r['weights'])}: {', '.join(r['recipe'])}")
    for bad in result["unreadable"]:
        console.print(f"unreadable: {plain(bad['weights'])}: {plain(bad['reason'])}")
    for ref in result["references"]:
        console.print(
            f"{ref['protocol']} on {ref['family']} q={ref['q']} s={ref['s']}: "
            f"{ref['transcript_bits']:,.0f} bits = {ref['ratio']:.2f}x the bound, "
            f"correct {ref['correct_fraction']:.4f}"
        )


def _show_frontier(console, frontier: list[dict]) -> None:
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
            plain(f["kind"]),
            str(f["models"]),
            str(f["decoded_models"]),
            (f"r{b['rank']} d{b['value_width']} seed {b['seed']}" if b else "-")
            + (" (recipe)" if b.get("recipe") else ""),
            num(b.get("bits_per_coordinate"), "d"),
            num(b.get("transcript_bits"), ",.0f"),
            f"{f['bound_bits']:.1f}",
            num(b.get("ratio"), ".2f") + ("x" if b else ""),
            _mode(b),
        )
    console.print(table)


def _mode(best: dict) -> str:
    """What "decoded" covered: every input, or a sample with its 95% error bound."""
    if not best:
        return "-"
    if best["mode"] == "exhaustive":
        return "every input"
    if best.get("evidence") == "proved":
        return "every input (proved)"
    upper, floor = best.get("error_rate_upper95"), best.get("floor_at_error")
    bound = f", error < {upper:.2g} at 95%" if upper is not None else ""
    bound += f", floor {floor:,.1f} bits" if floor is not None else ""
    return f"{best['inputs']:,} sampled{bound}"
