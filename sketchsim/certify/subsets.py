"""The pair subset that maximizes Lemma 4's bound, exactly (THEORY section 4).

:func:`sketchsim.certify.certificate.choose_pairs` picks the subset greedily.
The bound ``k^2 / (k + T(S))`` depends on a subset ``S`` only through its size
``k`` and ``T(S) = sum_{i != j in S} P_ij^2``, so for small families every
subset is enumerated: ``T`` of all ``2^n`` subsets is built by doubling
(adding element ``t`` to a subset of ``0..t-1`` adds ``sum_j (P_tj^2 + P_jt^2)``
over its members), ``O(n 2^n)`` additions in NumPy, and the best subset is
exact (ties: the smaller subset, then the smaller mask).
"""

from __future__ import annotations

import numpy as np

__all__ = ["OPTIMAL_MAX_PAIRS", "optimal_pairs", "subset_bound"]

#: Most pairs the exact choice enumerates (2^22 subsets: about 100 MB, a second).
OPTIMAL_MAX_PAIRS = 22


def subset_bound(P: np.ndarray, keep) -> float:
    """``n^2 / (n + sum_{i != j in keep} P_ij^2)``; 0 for the empty set or an unbounded entry."""
    keep = np.asarray(keep, dtype=np.int64)
    n = keep.size
    if n == 0:
        return 0.0
    sub = P[np.ix_(keep, keep)].astype(float).copy()
    np.fill_diagonal(sub, 0.0)
    if not np.all(np.isfinite(sub)):
        return 0.0
    return n * n / (n + float((sub**2).sum()))


def optimal_pairs(P: np.ndarray, strict: bool = True) -> np.ndarray:
    """Indices of the pair subset with the largest certified rank, then bound (exact; n <= 22).

    Parameters
    ----------
    P : ndarray, shape (n, n)
        Chain bounds (``inf``: unbounded; the diagonal is ignored).
    strict : bool
        The limit eps -> 1/2, where a subset of two or more pairs certifies
        ``floor(value) + 1`` (THEORY section 4); else ``ceil(value)``.  The rank
        used to rank subsets here is a float estimate; the certificate recomputes
        it exactly for the subset chosen.
    """
    n = P.shape[0]
    if n > OPTIMAL_MAX_PAIRS:
        raise ValueError(f"the exact choice takes at most {OPTIMAL_MAX_PAIRS} pairs, got {n}")
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    Q = np.asarray(P, dtype=float) ** 2
    np.fill_diagonal(Q, 0.0)
    W = Q + Q.T  # inf where either entry is unbounded
    T = np.zeros(1 << n)
    for t in range(n):
        size = 1 << t
        added = np.zeros(size)  # sum of W[t, j] over the members j < t of each mask
        for j in range(t):
            added[1 << j : 2 << j] = added[: 1 << j] + W[t, j]
        T[size : 2 * size] = T[:size] + added
    k = np.bitwise_count(np.arange(1 << n, dtype=np.uint64)).astype(float)
    with np.errstate(invalid="ignore"):
        value = np.where(np.isfinite(T) & (k > 0), k * k / (k + T), 0.0)
    if strict:
        rank = np.where(k >= 2, np.floor(value + 1e-9) + 1, np.ceil(value - 1e-9))
    else:
        rank = np.ceil(value - 1e-9)
    score = rank * (1 << 20) + value  # rank first (value < k <= 22 < 2^20), then the bound
    best = int(np.argmax(score))  # the first maximum: the smallest mask
    return np.flatnonzero([(best >> i) & 1 for i in range(n)]).astype(np.int64)
