"""Best certified bounds our code constructions give, per token width m.

For a code of constant weight, ``x_c`` = complement of ``c`` meets ``c'`` in
``|c' \\ c|`` ones; with chains available the entry bound is the best chain
product across that gap (:func:`~sketchsim.certify.chains.best_chain_product`),
which ``sketchsim witness --chains`` realizes and ``sketchsim certify`` confirms.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from sketchsim.attention import softmax_threshold
from sketchsim.certify.certificate import choose_pairs, rank_bound
from sketchsim.certify.chains import LIMIT, best_chain_product
from sketchsim.codes import (
    golay_dodecads,
    golay_octads,
    greedy_code,
    hadamard_code,
    hadamard_orders,
)

__all__ = ["code_bound", "BoundRow", "best_bound", "candidate_codes"]

#: Largest number of weight-w masks a greedy code may scan in ``sketchsim bound``.
GREEDY_SCAN = 3 * 10**7
#: Largest code used by ``sketchsim bound``.
MAX_WORDS = 1024


def code_bound(code: np.ndarray, eps: float = LIMIT) -> tuple[float, int]:
    """Lemma 4 bound (and pairs used) for a code's complement-query witness with chains."""
    code = np.asarray(code, dtype=np.int64)
    gaps = code @ (1 - code).T  # gaps[c, c'] = |c' \ c| = <x_c, c'>
    table = np.array([best_chain_product(g, eps) for g in range(code.shape[1] + 1)])
    P = table[gaps.T]  # row c, column c'
    np.fill_diagonal(P, 0.0)
    keep = choose_pairs(P)
    return (rank_bound(P[np.ix_(keep, keep)]) if keep.size else 0.0), int(keep.size)


def candidate_codes(m: int):
    """``(name, code)`` pairs tried for width ``m``."""
    if m in hadamard_orders(m):
        yield f"hadamard({m})+complements", hadamard_code(m, complements=True)
    if m == 24:
        yield "golay octads", golay_octads()
        yield "golay dodecads", golay_dodecads()[:MAX_WORDS]
    w = m // 2
    while w > 1 and math.comb(m, w) > GREEDY_SCAN:
        w -= 1
    for gap in range(2, w + 1):
        code = greedy_code(m, 2 * gap, w, limit=MAX_WORDS)
        if len(code) >= 2:
            yield f"greedy(w={w}, d={2 * gap})", code


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
    softmax_beta: float


def best_bound(m: int) -> BoundRow:
    """The best certified bound at width ``m`` (eps -> 1/2) over :func:`candidate_codes`."""
    best = BoundRow(m, "-", 0, 0, 0.0, 0, 2**m, softmax_threshold(3))
    for name, code in candidate_codes(m):
        value, pairs = code_bound(code)
        if value > best.bound:
            best = BoundRow(
                m,
                name,
                len(code),
                pairs,
                value,
                math.ceil(value - 1e-9),
                2**m,
                softmax_threshold(3),
            )
    return best
