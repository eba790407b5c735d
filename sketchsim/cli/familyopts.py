"""What ``transcript`` and ``frontier`` share: the family option, size checks, header."""

from __future__ import annotations

import click
from rich.panel import Panel

from sketchsim.cli import render
from sketchsim.errors import SketchsimError

__all__ = ["build_family", "check_support", "choose_inputs", "render_header", "validate_sizes"]

_SEED_MAX = 2**63 - 1


def validate_sizes(q: int, s: int, samples: int | None, seed: int) -> None:
    """One-line errors for impossible ``--q``, ``--s``, ``--samples``, ``--seed``."""
    if q < 1:
        raise click.UsageError(f"--q must be >= 1, got {q}")
    if s < 1:
        raise click.UsageError(f"--s must be >= 1, got {s}")
    if samples is not None and samples < 1:
        raise click.UsageError(f"--samples must be >= 1, got {samples}")
    if not 0 <= seed <= _SEED_MAX:
        raise click.UsageError(f"--seed must be in 0..2^63-1, got {seed}")


def build_family(spec: str, q: int, s: int, samples: int | None, seed: int):
    """``(family, default protocol specs)`` from a ``--family`` spec, after validation."""
    from sketchsim.sketch.family_plugins import resolve_family
    from sketchsim.sketch.transcript import DEFAULT_SPECS

    validate_sizes(q, s, samples, seed)
    ftype, fparams, _source = resolve_family(spec)
    family = ftype.make(q, s, seed, fparams)
    return family, ftype.default_protocols or DEFAULT_SPECS


def check_support(resolved, family) -> None:
    """Refuse, before any work, a protocol that does not declare the family."""
    from sketchsim.sketch.transcript import check_family

    for item in resolved:
        proto = item[1]
        proto = getattr(proto, "protocol", proto)  # plugins.resolve returns a record
        check_family(proto, family)


def choose_inputs(family, exhaustive, samples):
    """:func:`sketchsim.sketch.transcript.choose_answers`, with the limits worded for the CLI."""
    from sketchsim.sketch.transcript import InputLimitError, choose_answers

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
