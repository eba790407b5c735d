"""Data for the sweeps: the witness suite and the out-of-distribution (OOD) suite.

Each suite yields tensors-ready NumPy arrays: tokens ``[B, 3, m]`` (uint8),
targets ``[B, k]`` for the scored positions and which positions are scored.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sketchsim.errors import SketchsimError
from sketchsim.minip.kernel import minip_targets

__all__ = [
    "Split",
    "witness_split",
    "random_triples",
    "ood_splits",
    "ood_validation",
    "parse_scales",
]

#: Largest token width, pool size and triple count an OOD scale accepts.
MAX_OOD_M = 62
MAX_OOD_TRIPLES = 1_000_000
MAX_OOD_POOL = 1_000_000
#: Largest number of random training triples (witness suite, ``train_on=random``).
MAX_RANDOM_TRIPLES = 1_000_000


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
        if m > MAX_OOD_M:
            raise SketchsimError(f"scale {part!r}: m is at most {MAX_OOD_M}")
        if 2 * pool > 2**m:
            raise SketchsimError(f"scale {part!r}: m = {m} has fewer than {2 * pool} tokens")
        if pool > MAX_OOD_POOL:
            raise SketchsimError(
                f"scale {part!r}: at most {MAX_OOD_POOL:,} tokens per pool "
                f"(about {2 * pool * m / 2**30:.1f} GiB of tokens asked)"
            )
        if triples > MAX_OOD_TRIPLES:
            raise SketchsimError(
                f"scale {part!r}: at most {MAX_OOD_TRIPLES:,} triples per split "
                f"(about {triples * 3 * m * 8 / 2**30:.1f} GiB of training tensors asked)"
            )
        if triples > pool**3 // 2:
            raise SketchsimError(f"scale {part!r}: a pool of {pool} has too few triples")
        scales.append((m, pool, triples))
    if not scales:
        raise SketchsimError("scales is empty", param="scales")
    return scales


def random_triples(m: int, n: int, seed: int) -> Split:
    """``n`` random length-3 inputs of width ``m``, every position scored.

    Each token has its own density drawn uniformly from [0.2, 0.8], so the
    overlaps (and the targets) spread over their whole range instead of
    concentrating near ``m / 4``.
    """
    if n > MAX_RANDOM_TRIPLES:
        raise SketchsimError(f"at most {MAX_RANDOM_TRIPLES:,} random triples, asked {n:,}")
    rng = np.random.default_rng([seed, m, n, 3])
    density = rng.uniform(0.2, 0.8, size=(n, 3, 1))
    tokens = (rng.random((n, 3, m)) < density).astype(np.uint8)
    return Split(tokens, minip_targets(tokens).astype(np.float32), None)


def _distinct_tokens(m: int, count: int, rng) -> np.ndarray:
    """``count`` distinct tokens in ``{0,1}^m``, each drawn at a density from [0.2, 0.8]
    (topped up uniformly when the densities repeat themselves too often)."""
    seen: dict[bytes, np.ndarray] = {}
    for _ in range(20):
        need = count - len(seen)
        if need <= 0:
            break
        density = rng.uniform(0.2, 0.8, size=(2 * need, 1))
        for row in (rng.random((2 * need, m)) < density).astype(np.uint8):
            seen.setdefault(row.tobytes(), row)
    vecs = list(seen.values())[:count]
    if len(vecs) < count:
        have = {int("".join(map(str, v[::-1])), 2) for v in vecs}
        rest = np.setdiff1d(np.arange(2**m), np.fromiter(have, dtype=np.int64, count=len(have)))
        extra = rng.choice(rest, size=count - len(vecs), replace=False)
        vecs += list(((extra[:, None] >> np.arange(m)) & 1).astype(np.uint8))
    return np.stack(vecs)


def _ood_pools(m: int, pool: int, seed: int):
    """The train and test pools of :func:`ood_splits` and the generator it goes on with."""
    rng = np.random.default_rng([seed, m, pool])
    if 2 * pool > 2**m:
        raise SketchsimError(f"m = {m} has fewer than {2 * pool} distinct tokens")
    if m > MAX_OOD_M:
        raise SketchsimError(f"OOD suites support m <= {MAX_OOD_M}")
    vecs = _distinct_tokens(m, 2 * pool, rng)
    return vecs[:pool], vecs[pool:], rng


def _triples_from(tokens: np.ndarray, triples: int, rng) -> Split:
    idx = rng.integers(0, len(tokens), size=(triples, 3))
    picked = tokens[idx]
    return Split(picked, minip_targets(picked).astype(np.float32), None)


def ood_splits(m: int, pool: int, triples: int, seed: int) -> tuple[Split, Split]:
    """Disjoint train and test sets of ``triples`` length-3 inputs each.

    Tokens come from two disjoint pools of ``pool`` distinct random vectors in
    ``{0,1}^m`` (train pool, test pool; each token at its own density in
    [0.2, 0.8]), so test inputs share no token with training inputs; every
    position is scored.
    """
    train_pool, test_pool, rng = _ood_pools(m, pool, seed)
    return _triples_from(train_pool, triples, rng), _triples_from(test_pool, triples, rng)


def ood_validation(m: int, pool: int, triples: int, seed: int) -> tuple[Split, Split]:
    """A validation pair drawn from the *train* pool of :func:`ood_splits` only.

    The train pool's tokens are split in two disjoint halves (a random half to
    fit on, the other to validate on) and ``triples`` inputs drawn from each:
    choices made on it (a feature map, a learning rate) never see the test pool.
    """
    train_pool, _, _ = _ood_pools(m, pool, seed)
    if pool < 6:
        raise SketchsimError(f"a validation split needs a pool of at least 6 tokens, got {pool}")
    rng = np.random.default_rng([seed, m, pool, 1])
    order = rng.permutation(pool)
    fit_half, val_half = train_pool[order[: pool // 2]], train_pool[order[pool // 2 :]]
    return _triples_from(fit_half, triples, rng), _triples_from(val_half, triples, rng)
