"""Grouping inputs by transcript, and the collision search (THEORY section 5).

Transcripts are compared by 128-bit fingerprints (two independent 64-bit
hashes).  Fingerprints can only merge distinct transcripts, so the distinct
count is never overstated; every collision certificate is re-checked on the
exact transcripts before it is reported (:func:`verified_collision`).  The
single process and the cluster's reduce tasks group with :func:`sort_groups`.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from numba import njit

__all__ = [
    "sort_groups",
    "group_transcripts",
    "entropy_bits",
    "find_collision_candidates",
    "verified_collision",
]


def sort_groups(fp0: np.ndarray, fp1: np.ndarray, presorted: bool = False):
    """Sort fingerprints ``(fp0, fp1)`` into groups of equal transcripts.

    Parameters
    ----------
    fp0, fp1 : numpy.ndarray, uint64
        The two words of each input's fingerprint.
    presorted : bool
        ``fp0`` is already non-decreasing (the cluster's shuffle sorts each range).

    Returns
    -------
    order : numpy.ndarray or None
        The sorting permutation (None: the rows are in order already).
    new : numpy.ndarray of bool
        ``new[k]``: sorted row ``k`` starts a group.  Groups come in ``(fp0, fp1)``
        order: ``fp0`` alone decides unless two different transcripts share
        ``fp0`` (a 2^-64 event per pair), when the slower two-key sort runs.
    """
    n = fp0.shape[0]
    new = np.ones(n, dtype=bool)
    if n == 0:
        return None, new
    order = None if presorted else np.argsort(fp0)
    f0, f1 = (fp0, fp1) if order is None else (fp0[order], fp1[order])
    same0 = f0[1:] == f0[:-1]
    if (same0 & (f1[1:] != f1[:-1])).any():
        order = np.lexsort((fp1, fp0))
        f0, f1 = fp0[order], fp1[order]
        same0 = (f0[1:] == f0[:-1]) & (f1[1:] == f1[:-1])
    new[1:] = ~same0
    return order, new


def group_transcripts(fingerprints: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Group inputs by transcript.

    Returns
    -------
    inverse : numpy.ndarray, shape (B,)
        Group id of each input.
    counts : numpy.ndarray, shape (G,)
        Inputs per group.
    """
    B = fingerprints.shape[0]
    if B == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    order, new = sort_groups(fingerprints[:, 0], fingerprints[:, 1])
    group_sorted = np.cumsum(new) - 1
    inverse = np.empty(B, dtype=np.int64)
    if order is None:
        inverse[:] = group_sorted
    else:
        inverse[order] = group_sorted
    return inverse, np.bincount(group_sorted)


def entropy_bits(counts: np.ndarray) -> float:
    """Plug-in (empirical) entropy in bits of a distribution given by counts."""
    counts = np.asarray(counts, dtype=np.float64)
    total = counts.sum()
    if total == 0:
        return 0.0
    p = counts[counts > 0] / total
    h = float(-(p * np.log2(p)).sum())
    return max(0.0, min(h, math.log2(len(p))))  # clamp rounding noise to the true range


@njit(cache=True)
def _collision_pairs(inverse, n_groups, answers, limit):
    """First input of each group, then the first ``limit`` inputs whose answers differ from it."""
    B = inverse.shape[0]
    first = np.full(n_groups, -1, dtype=np.int64)
    for j in range(B):
        if first[inverse[j]] < 0:
            first[inverse[j]] = j
    out = np.zeros((limit, 2), dtype=np.int64)
    k = 0
    for j in range(B):
        if k >= limit:
            break
        r = first[inverse[j]]
        if r == j:
            continue
        for c in range(answers.shape[1]):
            if answers[j, c] != answers[r, c]:
                out[k, 0] = r
                out[k, 1] = j
                k += 1
                break
    return out[:k]


def find_collision_candidates(inverse: np.ndarray, answers: np.ndarray, limit: int = 8):
    """Pairs ``(i, j)`` with the same transcript group and different true answers.

    ``i`` is the first input of its group; at most ``limit`` pairs, earliest first.
    """
    B = inverse.shape[0]
    if B == 0 or limit <= 0:
        return []
    inverse = np.ascontiguousarray(inverse, dtype=np.int64)
    answers = np.ascontiguousarray(answers).reshape(B, -1)
    pairs = _collision_pairs(inverse, int(inverse.max()) + 1, answers, int(limit))
    return [(int(i), int(j)) for i, j in pairs]


def verified_collision(
    family, engine_of: Callable, candidates, answers_of: Callable
) -> dict | None:
    """The first candidate pair whose exact transcripts agree while their answers differ.

    Parameters
    ----------
    family : Family
        Builds the tokens of an answer vector.
    engine_of : callable
        ``engine_of()`` returns the engine to rerun (built only when a candidate
        needs it: the cluster's client has none until then).
    candidates : iterable of (int, int)
        Input pairs that share a fingerprint, first input first.
    answers_of : callable
        ``answers_of(i)`` is input ``i``'s answer vector.

    Returns
    -------
    dict or None
        The certificate: both inputs, their answers, the first differing query
        (1-based), the protocol's answer there, and ``verified: True``.
    """
    engine = None
    for i, j in candidates:
        Ta, Tb = answers_of(i), answers_of(j)
        if np.array_equal(Ta, Tb):
            continue  # an answer-hash collision: not a candidate
        engine = engine or engine_of()
        res = engine.run(family.tokens(np.stack([Ta, Tb])), store=True)
        if not np.array_equal(res.transcripts[0], res.transcripts[1]):
            continue  # a 128-bit fingerprint collision: not a certificate
        pos = int(np.argmax(Ta != Tb))
        return {
            "inputs": [int(i), int(j)],
            "answers_a": Ta.tolist(),
            "answers_b": Tb.tolist(),
            "position": pos + 1,
            "protocol_answer": int(res.answers[0, pos]),
            "transcript_entries": int(res.transcripts.shape[1]),
            "verified": True,
        }
    return None
