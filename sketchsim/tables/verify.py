"""``sketchsim verify``: the construction's panel, table and counterexample, from a
:class:`~sketchsim.heads.exhaustive.VerifyResult`."""

from __future__ import annotations

from rich.panel import Panel
from rich.table import Table

from sketchsim.tables.common import verdict

__all__ = ["show_verify"]


def show_verify(console, res) -> None:
    """The run's panel, its one-row table, the counterexample (or none) and the time."""
    head = Panel.fit(
        f"m = {res.m}, N = {res.n}, construction [bold]{res.construction}[/bold]"
        + (f", beta = {res.beta:g}" if res.beta is not None else "")
        + f", feature rank r = {res.rank:,}"
        + (", causal final query" if res.causal else "")
        + (
            f"\nsoftmax exactness threshold ln(2(N-1)) = {res.softmax_threshold:.4f}"
            if res.softmax_threshold is not None
            else ""
        ),
        title="sketchsim verify",
    )
    table = Table()
    for col in ("inputs", "max |y - t|", "exact fraction", "verdict"):
        table.add_column(col, justify="right")
    table.add_row(
        f"{res.inputs:,}",
        f"{res.max_abs_error:.6g}",
        f"{res.exact_fraction:.6f}",
        verdict(res.passed, "exact", "fails"),
    )
    # highlight=False: the markup sets every colour, and rich's automatic number
    # highlighter costs 10 ms of regex compilation in a run that takes 0.3 s
    console.print(head, table, highlight=False)
    if res.counterexample:
        ce = res.counterexample
        rows = "\n".join(f"  x{k + 1} = {''.join(map(str, t))}" for k, t in enumerate(ce["tokens"]))
        console.print(
            f"[red]counterexample[/red] (input #{ce['index']}):\n{rows}\n"
            f"  position {ce['position']}: target {ce['target']}, output {ce['output']:.6g}",
            highlight=False,
        )
    else:
        console.print("[green]no counterexample[/green]", highlight=False)
    console.print(f"[dim]{res.seconds:.2f} s[/dim]", highlight=False)
