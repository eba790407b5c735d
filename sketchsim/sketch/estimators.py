"""Estimators of a run: which inputs were answered right, entry entropy and used bits.

THEORY section 5: entry entropy (summed per-entry entropies, estimated with the
Miller-Madow correction and a confidence interval) bounds the transcript's
entropy from above, so an entry entropy below the bound refutes correctness.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit

from sketchsim.sketch.entry_counts import EntryCounts

__all__ = ["match_answers", "normal_quantile", "NORMAL_QUANTILES", "EntryBits", "entry_bits"]


@njit(nogil=True, cache=True)
def _match_rows(answers, T, lo, rows, correct):
    """``correct[lo + r] = (answers[r] == T[lo + r])`` for ``r < rows``; first wrong ``r`` or -1."""
    first = -1
    for r in range(rows):
        ok = True
        for i in range(T.shape[1]):
            if answers[r, i] != np.int64(T[lo + r, i]):
                ok = False
                break
        correct[lo + r] = ok
        if not ok and first < 0:
            first = r
    return first


def match_answers(answers: np.ndarray, T: np.ndarray, lo: int, rows: int, correct: np.ndarray):
    """Mark which of inputs ``lo..lo+rows-1`` got every answer right (in ``correct``).

    ``answers`` holds the engine's answers of those inputs in its first ``rows``
    rows, ``T`` the true answer vectors of all inputs.  Returns the offset of the
    first wrong input, or -1.  Releases the GIL.
    """
    return int(_match_rows(answers, T, lo, rows, correct))


@njit(cache=True)
def _entr(p):
    """``-p ln p`` elementwise (libm ``log``, as ``scipy.special.entr``); ``p > 0``."""
    out = np.empty_like(p)
    for i in range(p.shape[0]):
        out[i] = -p[i] * np.log(p[i])
    return out


#: Two-sided normal quantiles ``norm.ppf(0.5 + c / 2)`` of common confidences, so that
#: sampled runs do not import ``scipy.stats`` (the tests compare them with SciPy).
NORMAL_QUANTILES = {0.9: 1.6448536269514722, 0.95: 1.959963984540054, 0.99: 2.5758293035489004}


def normal_quantile(confidence: float) -> float:
    """``scipy.stats.norm.ppf(0.5 + confidence / 2)``, from a table where it can."""
    z = NORMAL_QUANTILES.get(confidence)
    if z is None:
        from scipy.stats import norm

        z = float(norm.ppf(0.5 + confidence / 2))
    return z


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
    hi = counts.n_entries if hi is None else hi
    n = counts.n
    sel = (counts.entry >= lo) & (counts.entry < hi)
    entry = counts.entry[sel] - lo
    width = max(hi - lo, 0)
    if n == 0 or width == 0:
        return EntryBits(0.0, 0.0, 0.0, 0.0, 0.0, 0)
    p = counts.count[sel] / n
    distinct = np.bincount(entry, minlength=width)
    h = np.bincount(entry, weights=_entr(p), minlength=width) / math.log(2)
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
    half = float(normal_quantile(confidence) * se.sum())
    under = int((distinct > n / 10).sum())
    return EntryBits(used, corrected, plugin, corrected - half, corrected + half, under)
