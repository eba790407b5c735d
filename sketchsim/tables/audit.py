"""``sketchsim audit``: per trained head, accuracy against the bits of its quantized state."""

from __future__ import annotations

from rich.table import Table

__all__ = ["show_audit"]


def show_audit(console, rows) -> None:
    """The heads of :func:`sketchsim.runs.audit.run` (an unmeasured head: its state only)."""
    table = Table(title="bit audit: exact-sequence accuracy from a quantized attention state")
    cols = ("file", "model", "r", "seed", "float32", "state bits (f32)", "k within 1 pt",
            "state bits at k", "1 bit", "4 bits", "8 bits", "float64 / failure")  # fmt: skip
    for col in cols:
        table.add_column(col, justify="left" if col in ("file", "model") else "right")
    for row in rows:
        spec = row["spec"]
        if "rows" not in row:
            table.add_row(row["file"], spec["model"], "-", str(spec["seed"]), "-", row["state"],
                          *["-"] * 6)  # fmt: skip
            continue
        by = {r["bits"]: r for r in row["rows"]}
        k = row["smallest_bits_within_1_point"]
        f32 = f"{by[32]['accuracy']:.3f}" + ("" if row["float32_matches"] else " [red]!=[/red]")
        fail = "-"
        if "failure" in row:
            fail = f"{row['float64_accuracy']:.3f} {row['failure']}"
        table.add_row(
            row["file"], f"{spec['model']} ({spec['feature_map']})", str(spec["rank"]),
            str(spec["seed"]), f32, f"{row['state_bits_float32']:,}",
            str(k) if k is not None else "none", f"{by[k]['state_bits']:,}" if k else "-",
            f"{by[1]['accuracy']:.3f}", f"{by[4]['accuracy']:.3f}", f"{by[8]['accuracy']:.3f}",
            fail,
        )  # fmt: skip
    console.print(table)
