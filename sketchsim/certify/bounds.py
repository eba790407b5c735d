"""Best certified bounds our code constructions give, per token width m.

For a code ``C`` the witness takes ``x_c`` = complement of ``c``, which meets
``c'`` in ``|c' \\ c|`` ones (the largest possible gap for every pair at once);
with chains available the entry bound is the best chain product across that
gap (:func:`~sketchsim.certify.chains.best_chain_product`), which ``sketchsim
witness --chains`` realizes and ``sketchsim certify`` confirms.

Exponential growth needs both gaps growing linearly in m (so chains make
``P`` exponentially small) and exponentially many words (THEORY section 4), so
besides the algebraic codes and lexicodes the search tries seeded random
greedy codes of weight about m/2 whose distance is a fixed fraction of m.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from sketchsim.certify.certificate import certified_rank, choose_pairs, rank_bound
from sketchsim.certify.chains import LIMIT, best_chain_product
from sketchsim.certify.codes import (
    golay_dodecads,
    golay_octads,
    greedy_code,
    hadamard_code,
    hadamard_orders,
    random_code,
)
from sketchsim.certify.streamed import (
    STREAMED_MIN_M,
    STREAMED_WORDS,
    random_streamed_code,
    streamed_code_bound,
)
from sketchsim.errors import SketchsimError
from sketchsim.heads.attention import softmax_threshold

__all__ = [
    "code_bound",
    "code_bound_words",
    "CodeBound",
    "BoundRow",
    "best_bound",
    "row_words",
    "candidate_codes",
    "fit_growth",
]

#: Largest number of weight-w masks a greedy lexicode may scan in ``sketchsim bound``.
GREEDY_SCAN = 3 * 10**7
#: Largest code used by ``sketchsim bound``.
MAX_WORDS = 4096
#: Relative distances d/m of the random codes tried.
RANDOM_FRACTIONS = (0.2, 0.25, 0.3, 0.35, 0.4)


@dataclass
class CodeBound:
    """Lemma 4 on a code's complement-query chain witness, and the words it keeps.

    Attributes
    ----------
    value : float
        ``n^2 / (n + sum P^2)`` over the kept words.
    pairs : int
        Number ``n`` of kept words (pairs ``(x_c, c)``).
    certified_rank : int
        The rank the value certifies.
    keep : numpy.ndarray of int64
        Indices of the kept words in the code: the witness family of exactly
        these words realizes the value (``sketchsim bound --export``).
    """

    value: float
    pairs: int
    certified_rank: int
    keep: np.ndarray


def code_bound_words(code: np.ndarray, eps: float = LIMIT) -> CodeBound:
    """:func:`code_bound` with the indices of the words (pairs) it keeps.

    Parameters
    ----------
    code : numpy.ndarray, shape (n, m)
        0/1 words.
    eps : float
        Error level (``0.5``: the limit, heads with error below 1/2).

    Returns
    -------
    CodeBound
    """
    code = np.asarray(code, dtype=np.float32)
    # gaps[c, c'] = |c' \ c| = <1 - c, c'>, exact in float32 for m < 2^24
    gaps = np.rint(code @ (1 - code).T).astype(np.int64)
    table = np.array([best_chain_product(g, eps) for g in range(code.shape[1] + 1)])
    P = table[gaps.T]  # row c, column c'
    np.fill_diagonal(P, 0.0)
    keep = choose_pairs(P)
    sub = P[np.ix_(keep, keep)]
    value = rank_bound(sub) if keep.size else 0.0
    return CodeBound(value, int(keep.size), certified_rank(sub, strict=eps == LIMIT), keep)


def code_bound(code: np.ndarray, eps: float = LIMIT) -> tuple[float, int, int]:
    """Lemma 4 bound, pairs used and certified rank of a code's complement-query chain witness."""
    res = code_bound_words(code, eps)
    return res.value, res.pairs, res.certified_rank


def candidate_codes(m: int, seed: int = 0):
    """``(name, code)`` pairs tried for width ``m``."""
    if m in hadamard_orders(m):
        yield f"hadamard({m})+complements", hadamard_code(m, complements=True)
    if m == 24:
        yield "golay octads", golay_octads()
        yield "golay dodecads", golay_dodecads()[:MAX_WORDS]
    w = m // 2
    if m <= 20:
        lw = w
        while lw > 1 and math.comb(m, lw) > GREEDY_SCAN:
            lw -= 1
        for gap in range(2, lw + 1):
            code = greedy_code(m, 2 * gap, lw, limit=MAX_WORDS)
            if len(code) >= 2:
                yield f"greedy(w={lw}, d={2 * gap})", code
    if 12 <= m <= 64:
        for d in sorted({max(6, 2 * round(frac * m / 2)) for frac in RANDOM_FRACTIONS}):
            code = random_code(m, w, d, limit=MAX_WORDS, seed=seed)
            if len(code) >= 2:
                yield f"random(w={w}, d={d}, seed={seed})", code
    if STREAMED_MIN_M <= m <= 64:  # past MAX_WORDS: Lemma 4 over all words, streamed
        code = random_streamed_code(m, w, 2, limit=STREAMED_WORDS, seed=seed)
        yield f"random(w={w}, d=4, seed={seed}, streamed)", code


@dataclass
class BoundRow:
    """One row of ``sketchsim bound``."""

    m: int
    code: str
    codewords: int
    pairs: int
    bound: float
    certified_rank: int
    exact_rank: int
    softmax_sufficient: float
    exact_softmax_threshold: float | None


def best_bound(m: int, seed: int = 0, exact_softmax_threshold: float | None = None) -> BoundRow:
    """The best certified bound at width ``m`` (error < 1/2) over :func:`candidate_codes`."""
    # one pair, no off-diagonal: r >= 1, true of every head (its denominators are nonzero)
    best = BoundRow(
        m, "any single word", 1, 1, 1.0, 1, 2**m, softmax_threshold(3), exact_softmax_threshold
    )
    for name, code in candidate_codes(m, seed):
        value, pairs, rank = (code_bound if len(code) <= MAX_WORDS else streamed_code_bound)(code)
        if rank > best.certified_rank or (rank == best.certified_rank and value > best.bound):
            best = BoundRow(
                m,
                name,
                len(code),
                pairs,
                value,
                rank,
                2**m,
                softmax_threshold(3),
                exact_softmax_threshold,
            )
    return best


def row_words(row: BoundRow, seed: int = 0) -> tuple[np.ndarray, CodeBound]:
    """The words a row of :func:`best_bound` keeps, rebuilt from :func:`candidate_codes`.

    Parameters
    ----------
    row : BoundRow
        A row of ``best_bound(row.m, seed)``.
    seed : int
        The seed that row was computed with.

    Returns
    -------
    words : numpy.ndarray of uint8, shape (pairs, m)
        The kept words, in code order: the witness family of exactly these words
        realizes the row's bound.
    res : CodeBound
        :func:`code_bound_words` of the full code (checked to give the row's value).

    Raises
    ------
    SketchsimError
        When no candidate code has the row's name, or it no longer gives the row's bound.
    """
    if row.code == "any single word":
        word = np.zeros((1, row.m), dtype=np.uint8)
        return word, CodeBound(1.0, 1, 1, np.zeros(1, dtype=np.int64))
    for name, code in candidate_codes(row.m, seed):
        if name != row.code:
            continue
        if len(code) > MAX_WORDS:  # a streamed code: every word kept, no family this size
            raise SketchsimError(
                f"m = {row.m}: the code {row.code!r} has {len(code):,} words, over the "
                f"{MAX_WORDS:,} whose witness family can be built"
            )
        res = code_bound_words(code)
        row_claim = (row.codewords, row.pairs, row.certified_rank)
        if (len(code), res.pairs, res.certified_rank) != row_claim:
            break
        return np.asarray(code, dtype=np.uint8)[res.keep], res
    raise SketchsimError(
        f"m = {row.m}: the code {row.code!r} of this row could not be rebuilt with seed {seed}"
    )


def fit_growth(ms, ranks) -> dict:
    """Least-squares fit ``log2 r = slope * m + intercept`` over rows with ``r >= 2``."""
    pts = [(m, math.log2(r)) for m, r in zip(ms, ranks, strict=True) if r >= 2]
    if len(pts) < 2:
        return {"slope": None, "intercept": None, "points": len(pts)}
    x, y = np.array(pts).T
    slope, intercept = np.polyfit(x, y, 1)
    return {"slope": float(slope), "intercept": float(intercept), "points": len(pts)}
