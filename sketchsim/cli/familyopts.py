"""What ``transcript`` and ``frontier`` share: input limits worded as flags, the header.

The family, its size checks and protocol support live in :mod:`sketchsim.sketch.inputs`.
"""

from __future__ import annotations

from rich.panel import Panel

from sketchsim.cli import render
from sketchsim.errors import SketchsimError

__all__ = ["choose_inputs", "render_header"]


def choose_inputs(family, exhaustive, samples):
    """:func:`sketchsim.sketch.input_plan.choose_answers`, with the limits worded for the CLI."""
    from sketchsim.sketch.input_plan import InputLimitError, choose_answers

    try:
        return choose_answers(family, exhaustive, samples)
    except InputLimitError as exc:
        if exc.kind == "exhaustive":
            hint = "sample instead: use --samples N (without --exhaustive)"
        else:
            hint = "use fewer --samples, or set SKETCHSIM_MAX_MEMORY_GB to raise the limit"
        raise SketchsimError(f"{exc}; {hint}") from None


def render_header(family, mode: str, inputs: int, seed: int) -> None:
    render.console.print(
        Panel.fit(
            f"{family.describe()}: m = {family.m} bits, N = {family.n_tokens} tokens, "
            f"answers in 0..{family.s}\nbound q*log2(s+1) = [bold]{family.bound_bits:.2f}[/bold] "
            f"bits; {mode} mode, {inputs:,} inputs, seed {seed}",
            title=f"sketchsim transcript (family {family.name})",
        )
    )
