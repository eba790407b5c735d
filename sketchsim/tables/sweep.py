"""``sketchsim sweep``: the suite's table (witness, ood, capacity), the learning-rate grid
and the ood transition, from a :class:`~sketchsim.experiments.suite_runs.SweepResult`."""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

__all__ = ["show_sweep", "sweep_title"]


def sweep_title(suite: str) -> str:
    """The table's (and the plot's) title of the witness or ood suite."""
    if suite == "witness":
        return "witness suite: sequence error on the family"
    return "ood suite: exact-sequence accuracy on disjoint test tokens"


def _show_capacity(console, result):
    table = Table(title="capacity suite: exact-sequence accuracy (all q answers right)")
    for col in ("family", "q", "s", "architecture", "seeds", "mean", "95% interval", "min"):
        table.add_column(col, justify="left" if col in ("family", "architecture") else "right")
    for r in result.summary:
        ci = "-" if r["ci_low"] is None else f"{r['ci_low']:.3f}-{r['ci_high']:.3f}"
        table.add_row(r["family"], str(r["q"]), str(r["s"]), r["architecture"], str(r["seeds"]),
                      f"{r['mean']:.3f}", ci, f"{r['min']:.3f}")  # fmt: skip
    console.print(table)
    for run in result.runs:
        if run.get("weights_refused"):
            console.print(
                f"weights not saved: {escape(run['architecture'])} on {run['family']} "
                f"q={run['q']} s={run['s']} seed {run['seed']}: {escape(run['weights_refused'])}"
            )


def show_sweep(console, result) -> None:
    """The suite's table, the learning-rate grid, the transition line (ood), or the
    capacity suite's accuracy table and the files whose weights were not saved."""
    if result.plan.suite == "capacity":
        return _show_capacity(console, result)
    plan, suite, bound = result.plan, result.plan.suite, result.bound
    trained_on = result.header.get("train_on", {})
    title = sweep_title(suite)
    table = Table(
        title=title,
        caption=(f"certified r >= {bound} for every head with error < 1/2" if bound else None),
    )
    cols = ["scale", "model", "r", "trained on", "seeds", "mean", "95% interval", "min", "max"]
    if result.max_abs_error:
        cols.append("max |y-t| (mean)")
    for col in cols:
        left = col in ("scale", "model", "trained on")
        table.add_column(col, justify="left" if left else "right")
    for k, row in enumerate(result.summary):
        model = row["model"] + (f" ({row['feature_map']})" if row["model"] != "softmax" else "")
        ci = "-" if row["ci_low"] is None else f"{row['ci_low']:.3f}-{row['ci_high']:.3f}"
        cells = [
            row["scale"] or "-",
            model,
            str(row["rank"] or "-"),
            {"random": "random triples", "pool": "train pool"}.get(
                trained_on.get(row["model"], ""), trained_on.get(row["model"], "")
            ),
            str(row["seeds"]),
            f"{row['mean']:.3f}",
            ci,
            f"{row['min']:.3f}",
            f"{row['max']:.3f}",
        ]
        if result.max_abs_error:
            cells.append(f"{result.max_abs_error[k]['mean']:.3f}")
        table.add_row(*cells)
    console.print(table)
    if result.lr_grid is not None:
        grid_table = Table(title="learning-rate grid: best over the grid; mean ± std over seeds")
        for col in ("scale", "model", "r", "best lr", "best", "mean ± std"):
            grid_table.add_column(col)
        for g in result.lr_grid:
            model = g["model"] + (f" ({g['feature_map']})" if g["model"] != "softmax" else "")
            grid_table.add_row(
                g["scale"] or "-",
                model,
                str(g["rank"] or "-"),
                f"{g['best_lr']:g}",
                f"{g['best']:.3f}",
                f"{g['mean']:.3f} ± {g['std']:.3f}",
            )
        console.print(grid_table)
    if result.transition is not None:
        for scale, cell in result.transition.items():
            if not cell["supported"]:
                text = "not measured (a 95% interval needs >= 3 seeds per rank)"
            else:
                text = f"[bold]{cell['rank'] if cell['rank'] is not None else 'none'}[/bold]"
            console.print(
                f"scale {scale}: smallest r whose 95% interval of test accuracy clears "
                f"{plan.accuracy:g}: {text}"
            )
