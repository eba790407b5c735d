"""``sketchsim ablation``: the markdown tables docs/results.md quotes, and the progress
lines, from the rows and results of :mod:`sketchsim.runs.ablation`."""

from __future__ import annotations

__all__ = [
    "maps_row_line",
    "maps_table",
    "stop_row_line",
    "stop_table",
    "ablation_head",
    "ablation_row",
]


def maps_row_line(row: dict) -> str:
    """One finished run of the feature-map screen."""
    return (
        f"  {row['feature_map']} r={row['rank']} seed {row['seed']}: "
        f"{row['validation_accuracy']:.3f} ({row['seconds']:.0f} s)"
    )


def maps_table(plan, result) -> list[str]:
    """Mean validation accuracy per feature map and rank (markdown)."""
    lines = ["| map | " + " | ".join(f"r = {r}" for r in plan.ranks) + " |"]
    lines.append("|---|" + "---|" * len(plan.ranks))
    for fmap in result.maps:
        cells = [f"{result.mean_accuracy(fmap, r):.3f}" for r in plan.ranks]
        lines.append(f"| {fmap} | " + " | ".join(cells) + " |")
    return lines


def stop_row_line(row: dict) -> str:
    """One finished run of the stop-margin screen."""
    return (
        f"  {row['scale']} {row['model']} stop {row['stop_below']} seed {row['seed']}: "
        f"{row['validation_accuracy']:.3f} after {row['steps']} steps"
    )


def stop_table(plan, result) -> list[str]:
    """Validation accuracy per model, margin and scale, the worst, and the margin chosen."""
    scales = result.scales
    lines = ["| model | stop below | " + " | ".join(scales) + " | worst |"]
    lines.append("|---|---|" + "---|" * (len(scales) + 1))
    for model, s in result.configs:
        cells = [" / ".join(f"{a:.3f}" for a in result.accuracies(model, s, sc)) for sc in scales]
        worst = result.worst(model, s)
        lines.append(f"| {model} | {s:g} | " + " | ".join(cells) + f" | {worst:.3f} |")
    kernel = result.kernel_steps()
    if kernel:
        full, total = kernel
        lines.append(
            f"kernel runs that used all {plan.steps} steps at the largest margin: "
            f"{full} of {total}" + (" (so no margin changes them)" if full == total else "")
        )
    lines.append(f"chosen stop margin (highest worst validation accuracy): {result.chosen:g}")
    return lines


def ablation_head(inputs: int, base: float) -> list[str]:
    """The witness family's size and baseline, and the table's header (markdown)."""
    return [
        f"witness family: {inputs} inputs; const-per-query MSE {base:.2f}",
        "| training | seeds | family sequence error | family max error | family MSE |",
        "|---|---|---|---|---|",
    ]


def ablation_row(plan, variant, got) -> str:
    """One training variant's row: its seeds' errors on the family."""
    seq = ", ".join(f"{g['family_sequence_error']:.3f}" for g in got)
    mx = ", ".join(f"{g['family_max_abs_error']:.2f}" for g in got)
    mse = ", ".join(f"{g['family_mse']:.2f}" for g in got)
    return f"| {variant.name} | {plan.seeds} | {seq} | {mx} | {mse} |"
