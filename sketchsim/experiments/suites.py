"""Data for the sweeps: the witness suite and the out-of-distribution (OOD) suite.

Each suite yields tensors-ready NumPy arrays: tokens ``[B, 3, m]`` (uint8),
targets ``[B, k]`` for the scored positions and which positions are scored.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sketchsim.errors import SketchsimError
from sketchsim.minip import minip_targets

__all__ = ["Split", "witness_split", "ood_splits", "parse_scales"]


@dataclass
class Split:
    """Tokens, targets and the scored position (None: every position)."""

    tokens: np.ndarray
    targets: np.ndarray
    scored: int | None


def witness_split(family) -> Split:
    """The whole witness family, scored at its position (train = test: a fitting task)."""
    p = family.position - 1
    return Split(family.tokens, family.targets[:, None].astype(np.float32), p)


def parse_scales(text: str) -> list[tuple[int, int, int]]:
    """``"8:32:400,12:64:800"`` to ``[(m, pool, triples), ...]``."""
    scales = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        try:
            m, pool, triples = (int(v) for v in part.split(":"))
        except ValueError:
            raise SketchsimError(
                f"scale {part!r} is not m:pool:triples (for example 8:32:400)"
            ) from None
        if m < 2 or pool < 3 or triples < 2:
            raise SketchsimError(f"scale {part!r}: need m >= 2, pool >= 3, triples >= 2")
        if triples > pool**3 // 2:
            raise SketchsimError(f"scale {part!r}: a pool of {pool} has too few triples")
        scales.append((m, pool, triples))
    if not scales:
        raise SketchsimError("--scales is empty")
    return scales


def ood_splits(m: int, pool: int, triples: int, seed: int) -> tuple[Split, Split]:
    """Disjoint train and test sets of ``triples`` length-3 inputs each.

    Tokens come from two disjoint pools of ``pool`` distinct random vectors in
    ``{0,1}^m`` (train pool, test pool), so test inputs share no token with
    training inputs; every position is scored.
    """
    rng = np.random.default_rng([seed, m, pool])
    if 2 * pool > 2**m:
        raise SketchsimError(f"m = {m} has fewer than {2 * pool} distinct tokens")
    ints = rng.choice(2**m, size=2 * pool, replace=False) if m <= 62 else None
    if ints is None:  # pragma: no cover - wide tokens: draw until distinct
        raise SketchsimError("OOD suites support m <= 62")
    vecs = ((ints[:, None] >> np.arange(m)) & 1).astype(np.uint8)
    out = []
    for half in (vecs[:pool], vecs[pool:]):
        idx = rng.integers(0, pool, size=(triples, 3))
        tokens = half[idx]
        out.append(Split(tokens, minip_targets(tokens).astype(np.float32), None))
    return out[0], out[1]
