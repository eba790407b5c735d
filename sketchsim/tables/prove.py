"""What ``prove`` and ``check-proof`` print."""

from __future__ import annotations

from rich.table import Table

from sketchsim.tables.common import plain

__all__ = ["show_prove", "show_checked"]


def show_prove(console, result) -> None:
    """The verdict, its evidence and the model's cut bits against the floor."""
    fam = result.family
    table = Table(
        title=f"prove: {plain(result.weights)} on F({fam['q']},{fam['s']}) at K = {result.bits}"
    )
    table.add_column("")
    table.add_column("")
    rows = [
        ("verdict", result.verdict),
        ("rounding", result.rounding),
        ("cut bits", f"{result.cut_bits} ({result.cut_bits / result.bound_bits:.2f}x the "
                     f"{result.bound_bits:g}-bit floor)"),
        ("boxes", f"{result.boxes:,}"),
        ("seconds", f"{result.seconds:.2f} (this machine)"),
        ("weights sha256", result.weights_sha256[:16] + "..."),
    ]  # fmt: skip
    if result.verdict == "proved":
        rows.append(("leaves", f"{result.leaves:,}"))
    if result.counterexample is not None:
        rows.append(("counterexample t", " ".join(map(str, result.counterexample))))
        rows.append(("engine answers", " ".join(map(str, result.engine_answers))))
    if result.verdict == "unknown":
        rows.append(("open boxes", f"{result.open_boxes:,} ({result.reason})"))
    if result.recipe:
        rows.append(("recipe (fixed by hand)", ", ".join(result.recipe)))
    if result.proof:
        rows.append(("proof", result.proof))
    for k, v in rows:
        table.add_row(k, plain(v))
    console.print(table)


def show_checked(console, checked) -> None:
    """One line: what the proof file proves."""
    console.print(
        f"VALID: {checked.kind} model (sha256 {checked.weights_sha256[:16]}...) answers every "
        f"input of F({checked.q},{checked.s}) right at K = {checked.bits} "
        f"(rounding {checked.rounding}); {checked.leaves:,} leaves re-verified"
    )
