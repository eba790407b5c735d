"""Transcript measures: distinct transcripts, empirical entropy, collisions, entry bits.

Transcripts are compared by 128-bit fingerprints (two independent 64-bit
hashes).  Fingerprints can only merge distinct transcripts, so the distinct
count is never overstated; every collision certificate is re-checked on the
exact transcripts before it is reported.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = [
    "group_transcripts",
    "entropy_bits",
    "find_collision_candidates",
    "EntryCounts",
    "EntryBits",
    "entry_bits",
]


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
    out = []
    step = 1 << 18  # chunks: no (B, q) temporaries
    for lo in range(0, B, step):
        hi = min(B, lo + step)
        differ = np.flatnonzero((answers[lo:hi] != answers[rep[lo:hi]]).any(axis=1))
        out += [(int(rep[lo + j]), int(lo + j)) for j in differ[: limit - len(out)]]
        if len(out) >= limit:
            break
    return out


# ---------------------------------------------------------------------------
# Per-entry statistics (sampled mode): entry entropy and used bits.
#
# THEORY section 5: a protocol correct on inputs drawn from the family has
# H(T) >= H(answers) = bound.  By subadditivity, H(T) <= sum_e H(T_e) (the
# "entry entropy"), and H(T_e) <= log2 |values T_e takes| (summed: "used bits").
# So entry entropy < bound proves that the protocol cannot be correct on the
# distribution, and entry entropy, unlike the joint entropy, is estimable from
# a sample: each entry takes few values even when transcripts never repeat.
# ---------------------------------------------------------------------------


class EntryCounts:
    """Accumulates, for every transcript entry, how often each value occurs.

    Stored sparsely as sorted ``(entry, value, count)`` triples, so memory is the
    number of distinct (entry, value) pairs seen, whatever the entries' ranges.
    """

    def __init__(self, n_entries: int):
        self.n_entries = int(n_entries)
        self.n = 0
        self.entry = np.zeros(0, dtype=np.int64)
        self.value = np.zeros(0, dtype=np.int64)
        self.count = np.zeros(0, dtype=np.int64)

    def add(self, transcripts: np.ndarray) -> None:
        """Count the values of a batch of exact transcripts, shape (B, n_entries)."""
        tr = np.asarray(transcripts, dtype=np.int64)
        if tr.ndim != 2 or tr.shape[1] != self.n_entries:
            raise ValueError(f"expected transcripts of shape (B, {self.n_entries}), got {tr.shape}")
        B, E = tr.shape
        self.n += B
        if B == 0 or E == 0:
            return
        st = np.ascontiguousarray(tr.T)  # (E, B), rows contiguous: sorted in place
        st.sort(axis=1)
        new = np.empty((E, B), dtype=bool)
        new[:, 0] = True
        new[:, 1:] = st[:, 1:] != st[:, :-1]
        start = np.flatnonzero(new)
        runs = np.diff(np.append(start, E * B))
        self._merge(start // B, st.reshape(-1)[start], runs)

    def _merge(self, entry, value, count) -> None:
        entry = np.concatenate([self.entry, entry])
        value = np.concatenate([self.value, value])
        count = np.concatenate([self.count, count])
        order = np.lexsort((value, entry))
        entry, value, count = entry[order], value[order], count[order]
        new = np.ones(entry.size, dtype=bool)
        new[1:] = (entry[1:] != entry[:-1]) | (value[1:] != value[:-1])
        first = np.flatnonzero(new)
        self.entry, self.value = entry[first], value[first]
        self.count = np.add.reduceat(count, first) if first.size else count[:0]


@dataclass(frozen=True)
class EntryBits:
    """Entry entropy and used bits of one range of entries (a layer, or all).

    ``entry_entropy`` is the estimate (Miller-Madow corrected when sampled, the
    exact plug-in value when exhaustive); ``ci`` its confidence interval.
    """

    used_bits: float
    entry_entropy: float
    plugin_entropy: float
    ci_low: float
    ci_high: float
    undersampled_entries: int

    def to_dict(self) -> dict:
        return {
            "used_bits": self.used_bits,
            "entry_entropy_bits": self.entry_entropy,
            "entry_entropy_plugin_bits": self.plugin_entropy,
            "entry_entropy_ci": [self.ci_low, self.ci_high],
            "undersampled_entries": self.undersampled_entries,
        }


def entry_bits(
    counts: EntryCounts, lo: int = 0, hi: int | None = None, exact: bool = False, confidence=0.95
) -> EntryBits:
    """Used bits and entry entropy of entries ``lo .. hi-1``.

    Estimator (per entry ``e`` with ``K_e`` observed values over ``n`` inputs):
    the plug-in entropy ``H_e = -sum p log2 p`` plus the Miller-Madow correction
    ``(K_e - 1) / (2 n ln 2)``; summed over entries.  The interval is the normal
    approximation with the delta-method standard error of each entry,
    ``sqrt((sum p log2^2 p - H_e^2) / n + (K_e - 1) / (2 n^2 ln^2 2))`` (the
    second term is the chi-square fluctuation of the plug-in estimate, which
    dominates for near-uniform entries), added over entries (the standard
    error of a sum of dependent estimates is at most the sum of theirs), at the
    given two-sided confidence.  With ``exact=True`` (every input of the family
    enumerated once) the plug-in value is the entropy itself: no correction,
    a zero-width interval.  An entry is *undersampled* when ``K_e > n / 10``:
    there the correction is unreliable.
    """
    from scipy.special import entr
    from scipy.stats import norm

    hi = counts.n_entries if hi is None else hi
    n = counts.n
    sel = (counts.entry >= lo) & (counts.entry < hi)
    entry = counts.entry[sel] - lo
    width = max(hi - lo, 0)
    if n == 0 or width == 0:
        return EntryBits(0.0, 0.0, 0.0, 0.0, 0.0, 0)
    p = counts.count[sel] / n
    distinct = np.bincount(entry, minlength=width)
    h = np.bincount(entry, weights=entr(p), minlength=width) / math.log(2)
    used = float(np.log2(np.maximum(distinct, 1)).sum())
    plugin = float(h.sum())
    if exact:
        return EntryBits(used, plugin, plugin, plugin, plugin, 0)
    log2p = np.log2(p)
    second = np.bincount(entry, weights=p * log2p * log2p, minlength=width)
    # delta-method variance, plus the variance of the second-order (chi-square) term
    # (K-1)/(2 n^2 ln^2 2), which dominates where the first vanishes (uniform entries)
    chi2 = np.maximum(distinct - 1, 0) / (2 * n * n * math.log(2) ** 2)
    se = np.sqrt(np.maximum(second - h * h, 0.0) / n + chi2)
    corrected = plugin + float(np.maximum(distinct - 1, 0).sum()) / (2 * n * math.log(2))
    half = float(norm.ppf(0.5 + confidence / 2) * se.sum())
    under = int((distinct > n / 10).sum())
    return EntryBits(used, corrected, plugin, corrected - half, corrected + half, under)
