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
    "bucket_order",
    "sort_groups",
    "group_transcripts",
    "entropy_bits",
    "entropy_from_size_histogram",
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
    if presorted:
        order, f0, f1 = None, fp0, fp1
    else:
        order, f0 = bucket_order(fp0)
        f1 = fp1[order]
    same0 = f0[1:] == f0[:-1]
    if (same0 & (f1[1:] != f1[:-1])).any():
        order = np.lexsort((fp1, fp0))
        f0, f1 = fp0[order], fp1[order]
        same0 = (f0[1:] == f0[:-1]) & (f1[1:] == f1[:-1])
    new[1:] = ~same0
    return order, new


# Fingerprints are hashes, so their top bits spread the inputs evenly: a counting
# sort on the top k bits (about two inputs per bucket) and an insertion sort inside
# each bucket order them in O(B).  The counting sort keeps input order, so a bucket
# that is already in order (one transcript shared by many inputs) is left as it is.
# Any other large bucket (keys that are not hashes) sends the whole sort to NumPy.
# numpy's argsort alone took 2-4x longer on hashes (issue #31).
_BUCKET_BITS_MAX = 22
_INSERTION_MAX = 32


@njit(cache=True)
def _bucket_sort(fp0):
    """``(order, fp0[order], ok)``; ``ok`` False when a large bucket was out of order."""
    n = fp0.shape[0]
    k = 1
    while k < _BUCKET_BITS_MAX and (np.int64(1) << (k + 1)) <= n:
        k += 1
    shift = np.uint64(64 - k)
    start = np.zeros((1 << k) + 1, dtype=np.int64)
    for i in range(n):
        start[np.int64(fp0[i] >> shift) + 1] += 1
    for b in range(1 << k):
        start[b + 1] += start[b]
    pos = start[:-1].copy()
    keys = np.empty(n, dtype=np.uint64)
    order = np.empty(n, dtype=np.int64)
    for i in range(n):
        b = np.int64(fp0[i] >> shift)
        p = pos[b]
        keys[p] = fp0[i]
        order[p] = i
        pos[b] = p + 1
    for b in range(1 << k):
        lo, hi = start[b], start[b + 1]
        if hi - lo > _INSERTION_MAX:
            for j in range(lo + 1, hi):
                if keys[j] < keys[j - 1]:
                    return order, keys, False
            continue
        for j in range(lo + 1, hi):  # insertion sort: stable
            key, at = keys[j], order[j]
            t = j
            while t > lo and keys[t - 1] > key:
                keys[t] = keys[t - 1]
                order[t] = order[t - 1]
                t -= 1
            keys[t] = key
            order[t] = at
    return order, keys, True


def bucket_order(fp0: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(order, fp0[order])``: the stable sorting permutation of ``fp0`` (uint64).

    The same as ``np.argsort(fp0, kind="stable")``, in about O(n) for hashes.
    """
    fp0 = np.ascontiguousarray(fp0, dtype=np.uint64)
    if fp0.shape[0] == 0:
        return np.zeros(0, dtype=np.int64), fp0.copy()
    order, keys, ok = _bucket_sort(fp0)
    if not ok:
        order = np.argsort(fp0, kind="stable")
        keys = fp0[order]
    return order, keys


@njit(cache=True)
def _number_groups(order, keys, fp1):
    """``(conflict, inverse, counts)`` for inputs sorted by ``keys`` (``fp0[order]``):
    groups of equal ``fp0`` in that order; ``conflict`` when one group's ``fp1`` differ."""
    n = order.shape[0]
    inverse = np.empty(n, dtype=np.int64)
    counts = np.zeros(n, dtype=np.int64)
    g = -1
    conflict = False
    last1 = np.uint64(0)
    for j in range(n):
        i = order[j]
        f1 = fp1[i]
        if j == 0 or keys[j] != keys[j - 1]:
            g += 1
        elif f1 != last1:
            conflict = True
        last1 = f1
        inverse[i] = g
        counts[g] += 1
    return conflict, inverse, counts[: g + 1]


def group_transcripts(fingerprints: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Group inputs by transcript.

    Groups are numbered in ``(fp0, fp1)`` order, as :func:`sort_groups` orders them.

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
    order, keys = bucket_order(fingerprints[:, 0])
    fp1 = np.ascontiguousarray(fingerprints[:, 1], dtype=np.uint64)
    conflict, inverse, counts = _number_groups(order, keys, fp1)
    if not conflict:
        return inverse, counts
    order, new = sort_groups(fingerprints[:, 0], fingerprints[:, 1])
    group_sorted = np.cumsum(new) - 1
    inverse = np.empty(B, dtype=np.int64)
    if order is None:
        inverse[:] = group_sorted
    else:
        inverse[order] = group_sorted
    return inverse, np.bincount(group_sorted)


def entropy_from_size_histogram(sizes, multiplicities) -> float:
    """Plug-in entropy in bits of groups given by their size histogram.

    ``multiplicities[k]`` groups hold ``sizes[k]`` items each; with ``N`` items,
    ``H = log2 N - (1/N) sum_k m_k c_k log2 c_k`` (the plug-in ``-sum_g p_g log2 p_g``
    with ``p_g = c_g / N``, grouped by size).  The sum is exactly rounded
    (``math.fsum``), so the value does not depend on the order of the groups
    or on how they were split: a cluster's merged histogram gives this
    process's number.  Clamped to ``[0, log2 #groups]`` (rounding noise).
    """
    pairs = [(int(c), int(k)) for c, k in zip(sizes, multiplicities, strict=True) if c and k]
    total = sum(c * k for c, k in pairs)
    groups = sum(k for _, k in pairs)
    if total == 0:
        return 0.0
    s = math.fsum(float(k) * c * math.log2(c) for c, k in pairs)
    h = math.log2(total) - s / total
    return max(0.0, min(h, math.log2(groups)))


def entropy_bits(counts: np.ndarray) -> float:
    """Plug-in (empirical) entropy in bits of a distribution given by counts
    (:func:`entropy_from_size_histogram` of their histogram)."""
    counts = np.asarray(counts, dtype=np.int64)
    sizes, multiplicities = np.unique(counts[counts > 0], return_counts=True)
    return entropy_from_size_histogram(sizes.tolist(), multiplicities.tolist())


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
