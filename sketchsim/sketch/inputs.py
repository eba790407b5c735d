"""What a transcript or frontier run starts from: a family, its size checks, resolved protocols."""

from __future__ import annotations

from sketchsim.errors import SketchsimError

__all__ = ["SEED_MAX", "validate_sizes", "build_family", "resolve_protocols", "check_support"]

#: Largest seed accepted (NumPy's generators take any non-negative int; JSON keeps int64).
SEED_MAX = 2**63 - 1


def validate_sizes(q: int, s: int, samples: int | None, seed: int) -> None:
    """One-line errors for impossible ``q``, ``s``, ``samples`` or ``seed``."""
    if q < 1:
        raise SketchsimError(f"q must be >= 1, got {q}", param="q")
    if s < 1:
        raise SketchsimError(f"s must be >= 1, got {s}", param="s")
    if samples is not None and samples < 1:
        raise SketchsimError(f"samples must be >= 1, got {samples}", param="samples")
    if not 0 <= seed <= SEED_MAX:
        raise SketchsimError(f"seed must be in 0..2^63-1, got {seed}", param="seed")


def build_family(spec: str, q: int, s: int, samples: int | None, seed: int):
    """``(family, default protocol specs)`` from a family spec, after validation.

    Parameters
    ----------
    spec : str
        ``NAME[:k=v,...]``, ``path/file.py:NAME`` or ``pkg.module:NAME`` (``hard`` is F(q, s)).
    q, s : int
        Independent answers, each in ``0..s``.
    samples : int or None
        Inputs to draw in sampled mode (checked only).
    seed : int
        Seed of the family's bit layout.
    """
    from sketchsim.sketch.family_plugins import resolve_family
    from sketchsim.sketch.measure import DEFAULT_SPECS

    validate_sizes(q, s, samples, seed)
    ftype, fparams, _source = resolve_family(spec)
    family = ftype.make(q, s, seed, fparams)
    return family, ftype.default_protocols or DEFAULT_SPECS


def resolve_protocols(specs) -> list:
    """``[(spec, resolution)]`` for protocol specs (built-in, installed, file or module)."""
    from sketchsim.sketch.plugins import discover, resolve

    found = discover()
    return [(spec, resolve(spec, found)) for spec in specs]


def check_support(resolved, family) -> None:
    """Refuse, before any work, a protocol that does not declare the family, or whose
    ``preflight`` refuses the run (a weights file trained on another family)."""
    from sketchsim.sketch.measure import check_family

    for item in resolved:
        proto = item[1]
        proto = getattr(proto, "protocol", proto)  # plugins.resolve returns a record
        check_family(proto, family)
        proto.check_run(getattr(item[1], "params", {}), family)
