"""Transcript measures: distinct transcripts, empirical entropy, collisions.

Transcripts are compared by 128-bit fingerprints (two independent 64-bit
hashes).  Fingerprints can only merge distinct transcripts, so the distinct
count is never overstated; every collision certificate is re-checked on the
exact transcripts before it is reported.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["group_transcripts", "entropy_bits", "find_collision_candidates"]


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
    order = np.lexsort((fingerprints[:, 1], fingerprints[:, 0]))
    fp = fingerprints[order]
    new = np.ones(B, dtype=bool)
    new[1:] = (fp[1:] != fp[:-1]).any(axis=1)
    group_sorted = np.cumsum(new) - 1
    inverse = np.empty(B, dtype=np.int64)
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


def find_collision_candidates(inverse: np.ndarray, answers: np.ndarray, limit: int = 8):
    """Pairs ``(i, j)`` with the same transcript group and different true answers.

    ``i`` is the first input of its group; at most ``limit`` pairs, earliest first.
    """
    B = inverse.shape[0]
    if B == 0:
        return []
    first = np.full(inverse.max() + 1, B, dtype=np.int64)
    np.minimum.at(first, inverse, np.arange(B))
    rep = first[inverse]
    differ = np.flatnonzero((answers != answers[rep]).any(axis=1))
    return [(int(rep[j]), int(j)) for j in differ[:limit]]
