"""Lemma 4 bounds of large complement-query codes, streamed (THEORY section 4).

For a code ``C`` with complement queries ``x_c = ~c`` the entry bound of the
ordered pair ``(c, c')`` depends only on the gap ``|c' \\ c|`` (the best chain
product across it, :func:`~sketchsim.certify.chains.best_chain_product`), so
Lemma 4 over *all* words needs only the histogram of the gaps of the
``n (n - 1)`` ordered pairs:

    r >= n^2 / (n + sum_g count_g P(g)^2)

valid when every gap that occurs has a finite ``P(g) <= 1``.  The histogram is
counted by a jitted popcount over packed 64-bit words, ``O(n^2)`` time and
``O(n)`` memory, so codes of ``2^17`` words at ``m = 64`` are bounded without
the dense ``n x n`` matrix :func:`~sketchsim.certify.bounds.code_bound` forms
(128 MiB at 4,096 words).  No pair is dropped: on a code where
``code_bound`` keeps every word the two agree.

The certified integer follows the rule of
:func:`~sketchsim.certify.certificate.certified_rank`: for heads with error
strictly below 1/2 (``eps = 1/2``) every entry is strictly below its bound, so
``r >= floor(value) + 1``, decided in exact rationals (every ``P(g)`` is then
``1 / K`` for an integer ``K``); for ``eps < 1/2``, ``r >= ceil(value)``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from fractions import Fraction

import numpy as np
from numba import njit

from sketchsim.certify.chains import LIMIT, best_chain_product
from sketchsim.certify.codes import RANDOM_DRAWS
from sketchsim.errors import SketchsimError
from sketchsim.minip.bits import pack_bits, popcount64

__all__ = [
    "StreamedBound",
    "gap_histogram",
    "greedy_gap_code",
    "random_weight_words",
    "histogram_bound",
    "streamed_bound",
    "random_streamed_bound",
    "random_streamed_code",
    "streamed_code_bound",
    "STREAMED_MIN_M",
    "STREAMED_WORDS",
]

#: Smallest m at which ``sketchsim bound`` adds a streamed code (up to m = 32 every
#: family it reports stays small enough for ``witness`` to build).
STREAMED_MIN_M = 34
#: Words of that code (the histogram takes about 2 s at m = 64 on one core).
STREAMED_WORDS = 1 << 16


@dataclass
class StreamedBound:
    """Lemma 4 over every word of a code, from its gap histogram.

    Attributes
    ----------
    words : int
        Number of words ``n`` (every one is a pair of the certificate).
    value : float
        ``n^2 / (n + sum P^2)``.
    certified_rank : int
        The integer rank the value certifies (see the module docstring).
    sum_p2 : float
        ``sum_{c != c'} P_cc'^2``.
    histogram : list of int
        ``histogram[g]``: ordered pairs ``(c, c')``, ``c != c'``, with ``|c' \\ c| = g``.
    """

    words: int
    value: float
    certified_rank: int
    sum_p2: float
    histogram: list

    def to_dict(self) -> dict:
        """The fields as a JSON-ready dict."""
        return asdict(self)


def _as_packed(code: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Packed words ``(n, ceil(m / 64))`` uint64 and the weights of a 0/1 code."""
    code = np.asarray(code)
    if code.ndim != 2:
        raise SketchsimError(f"a code is a 2-d array of 0/1 rows, got shape {code.shape}")
    packed = np.ascontiguousarray(pack_bits(code).reshape(code.shape[0], -1))
    weights = code.sum(axis=1, dtype=np.int64)
    return packed, weights


@njit(cache=True)
def _gap_histogram(words, weights, size):
    """Histogram of ``|c_j \\ c_i|`` over ordered pairs ``i != j`` of packed words."""
    n, k = words.shape
    hist = np.zeros(size, dtype=np.int64)
    for i in range(n):
        for j in range(i + 1, n):
            common = 0
            for t in range(k):
                common += popcount64(words[i, t] & words[j, t])
            hist[weights[j] - common] += 1
            hist[weights[i] - common] += 1
    return hist


#: Independent histogram rows the one-word kernels add into (breaks store dependencies).
LANES = 4


@njit(cache=True)
def _common_histogram64(words, size):
    """Histogram of ``popcount(c_i & c_j)`` over unordered pairs of one-word codes."""
    n = words.shape[0]
    hist = np.zeros((LANES, size), dtype=np.int64)
    for i in range(n):
        a = words[i]
        for j in range(i + 1, n):
            hist[j % LANES, popcount64(a & words[j])] += 1
    return hist.sum(axis=0)


def _constant_weight(weights: np.ndarray) -> int | None:
    """The common weight of all words, or None."""
    if len(weights) and np.all(weights == weights[0]):
        return int(weights[0])
    return None


def _from_common(common: np.ndarray, w: int, size: int) -> np.ndarray:
    """Ordered-pair gap histogram of a weight-``w`` code from its intersection histogram."""
    hist = np.zeros(size, dtype=np.int64)
    hist[w - np.arange(w + 1)] = 2 * common[: w + 1]
    return hist


def gap_histogram(code: np.ndarray) -> np.ndarray:
    """Gap histogram of a code's complement queries (jitted popcount).

    Constant-weight codes with ``m <= 64`` use a one-word kernel that counts each
    unordered pair once (``|c' \\ c| = |c \\ c'| = w - |c & c'|``).

    Parameters
    ----------
    code : numpy.ndarray, shape (n, m)
        0/1 rows (any ``m >= 1``; rows are packed into 64-bit words).

    Returns
    -------
    numpy.ndarray of int64, shape (m + 1,)
        Entry ``g``: the ordered pairs ``(c, c')``, ``c != c'``, with
        ``|c' \\ c| = <~c, c'> = g``; the entries sum to ``n (n - 1)``.
    """
    packed, weights = _as_packed(code)
    size = np.asarray(code).shape[1] + 1
    w = _constant_weight(weights)
    if w is not None and packed.shape[1] == 1:
        return _from_common(_common_histogram64(packed[:, 0], size), w, size)
    return _gap_histogram(packed, weights, size)


@njit(cache=True)
def _greedy_gap_code(words, weights, min_gap, limit, size):
    """Keep each word whose gaps to and from every kept word are ``>= min_gap``.

    Returns the kept indices (stream order) and the gap histogram of the kept words.
    """
    n, k = words.shape
    kept = np.empty(min(n, limit), dtype=np.int64)
    hist = np.zeros(size, dtype=np.int64)
    row = np.zeros(size, dtype=np.int64)
    count = 0
    for j in range(n):
        if count >= limit:
            break
        row[:] = 0
        ok = True
        for a in range(count):
            i = kept[a]
            common = 0
            for t in range(k):
                common += popcount64(words[i, t] & words[j, t])
            g_ij = weights[j] - common
            g_ji = weights[i] - common
            if g_ij < min_gap or g_ji < min_gap:
                ok = False
                break
            row[g_ij] += 1
            row[g_ji] += 1
        if ok:
            kept[count] = j
            count += 1
            hist += row
    return kept[:count], hist


@njit(cache=True)
def _greedy_common64(words, max_common, limit, size):
    """One-word constant-weight :func:`_greedy_gap_code`: keep if every ``|c & c'| <= max_common``.

    Returns the kept indices and the intersection histogram over their unordered pairs.
    """
    n = words.shape[0]
    kept = np.empty(min(n, limit), dtype=np.int64)
    keptw = np.empty(min(n, limit), dtype=np.uint64)
    hist = np.zeros(size, dtype=np.int64)
    row = np.zeros((LANES, size), dtype=np.int64)
    count = 0
    for j in range(n):
        if count >= limit:
            break
        row[:, :] = 0
        v = words[j]
        ok = True
        for a in range(count):
            common = popcount64(keptw[a] & v)
            if common > max_common:
                ok = False
                break
            row[a % LANES, common] += 1
        if ok:
            kept[count] = j
            keptw[count] = v
            count += 1
            hist += row.sum(axis=0)
    return kept[:count], hist


def greedy_gap_code(code: np.ndarray, min_gap: int, limit: int) -> tuple[np.ndarray, np.ndarray]:
    """Greedy sub-code with every gap ``>= min_gap``, and its gap histogram, in one pass.

    Parameters
    ----------
    code : numpy.ndarray, shape (n, m)
        Candidate 0/1 rows, in stream order.
    min_gap : int
        Smallest allowed ``|c' \\ c|`` in either direction (for a constant-weight
        code, minimum distance ``2 * min_gap``).
    limit : int
        Largest number of words kept.

    Returns
    -------
    kept : numpy.ndarray of int64
        Indices of the kept rows, in stream order.
    histogram : numpy.ndarray of int64, shape (m + 1,)
        :func:`gap_histogram` of ``code[kept]``.
    """
    if limit < 1:
        raise SketchsimError(f"limit must be >= 1, got {limit}")
    packed, weights = _as_packed(code)
    size = np.asarray(code).shape[1] + 1
    w = _constant_weight(weights)
    if w is not None and packed.shape[1] == 1:
        kept, common = _greedy_common64(packed[:, 0], w - int(min_gap), int(limit), size)
        return kept, _from_common(common, w, size)
    return _greedy_gap_code(packed, weights, int(min_gap), int(limit), size)


def random_weight_words(m: int, w: int, draws: int, seed: int = 0) -> np.ndarray:
    """Seeded random weight-``w`` words, the candidate stream of ``codes.random_code``.

    The same seed gives the same words in the same order, so
    ``greedy_gap_code(random_weight_words(m, w, draws, seed), d // 2, limit)``
    keeps the words of ``random_code(m, w, d, limit, draws, seed)`` for even ``d``.

    Parameters
    ----------
    m : int
        Length, ``1 <= m <= 64``.
    w : int
        Weight, ``0 <= w <= m``.
    draws : int
        Number of words.
    seed : int
        Seed of the stream.

    Returns
    -------
    numpy.ndarray of uint8, shape (draws, m)
    """
    if not 1 <= m <= 64:
        raise SketchsimError(f"random words need 1 <= m <= 64, got m = {m}")
    if not 0 <= w <= m:
        raise SketchsimError(f"weight w must be in 0..{m}, got {w}")
    rng = np.random.default_rng(seed)
    chunk = 1 << 14  # as codes.random_code draws them
    rows = np.zeros((draws, m), dtype=np.uint8)
    for start in range(0, draws, chunk):
        size = min(chunk, draws - start)
        pick = np.argsort(rng.random((size, m)), axis=1)[:, :w]
        np.put_along_axis(rows[start : start + size], pick, 1, axis=1)
    return rows


def _entry_bounds(size: int, eps: float) -> np.ndarray:
    """``P(g)`` for ``g = 0..size-1``; ``inf`` where a chain bounds nothing (``P > 1``)."""
    table = np.array([best_chain_product(g, eps) for g in range(size)], dtype=np.float64)
    return np.where(table <= 1.0, table, np.inf)


def _exact_value(n: int, counts: np.ndarray, bounds: np.ndarray) -> Fraction | None:
    """``n^2 / (n + sum count / K^2)`` exactly when every used bound is ``1 / K``, K integer."""
    inv = 1.0 / bounds
    K = np.rint(inv)
    if np.any(K > 2**50) or not np.allclose(inv, K, rtol=1e-9, atol=0.0):
        return None
    total = sum(
        Fraction(int(c), int(k) ** 2) for k, c in zip(K.astype(np.int64), counts, strict=True)
    )
    return Fraction(n * n) / (n + total)


def histogram_bound(histogram: np.ndarray, n: int, eps: float = LIMIT) -> StreamedBound:
    """Lemma 4 over all ``n`` words of a code from its gap histogram.

    Parameters
    ----------
    histogram : numpy.ndarray of int
        Ordered pairs per gap, as :func:`gap_histogram` returns.
    n : int
        Number of words.
    eps : float
        Error level; ``0.5`` is the limit of every head with error below 1/2.

    Returns
    -------
    StreamedBound

    Raises
    ------
    SketchsimError
        If some pair has a gap whose chain bounds nothing (``P(g)`` infinite or
        above 1): then pairs must be dropped, which this bound does not do.
    """
    hist = np.asarray(histogram, dtype=np.int64)
    if int(hist.sum()) != n * (n - 1):
        raise SketchsimError(f"histogram holds {int(hist.sum()):,} pairs, not n(n-1) for n = {n}")
    bounds = _entry_bounds(len(hist), eps)
    used = np.flatnonzero(hist)
    if np.any(~np.isfinite(bounds[used])):
        bad = [int(g) for g in used if not np.isfinite(bounds[g])]
        raise SketchsimError(f"pairs at gaps {bad} are unbounded at eps = {eps}; drop them first")
    sum_p2 = float((hist[used] * bounds[used] ** 2).sum())
    value = n * n / (n + sum_p2) if n else 0.0
    rank = _certify(value, n, hist[used], bounds[used], strict=eps == LIMIT)
    return StreamedBound(n, value, rank, sum_p2, hist.tolist())


def _certify(value: float, n: int, counts: np.ndarray, bounds: np.ndarray, strict: bool) -> int:
    """The rounding rule of ``certificate.certified_rank``, from histogram counts."""
    if n == 0:
        return 0
    if not strict or n < 2:
        return int(math.ceil(value - 1e-9))
    frac = value - math.floor(value)
    if 1e-6 < frac < 1 - 1e-6:  # far from an integer: rounding cannot matter
        return int(math.floor(value)) + 1
    exact = _exact_value(n, counts, bounds)
    if exact is None:
        return int(math.ceil(value - 1e-9))
    return int(math.floor(exact)) + 1


def streamed_bound(code: np.ndarray, eps: float = LIMIT) -> StreamedBound:
    """Lemma 4 over every word of ``code`` with complement queries, never forming ``P``.

    Parameters
    ----------
    code : numpy.ndarray, shape (n, m)
        0/1 rows.
    eps : float
        Error level (``0.5``: heads with error below 1/2).

    Returns
    -------
    StreamedBound
    """
    code = np.asarray(code)
    return histogram_bound(gap_histogram(code), code.shape[0], eps)


def random_streamed_bound(
    m: int, w: int, min_gap: int, limit: int, draws: int | None = None, seed: int = 0
) -> StreamedBound:
    """Lemma 4 over a seeded greedy random constant-weight code of up to ``limit`` words.

    Parameters
    ----------
    m, w : int
        Length (``<= 64``) and weight.
    min_gap : int
        Smallest gap ``|c' \\ c|`` kept (minimum distance ``2 * min_gap``).
    limit : int
        Largest number of words.
    draws : int, optional
        Candidate words (default ``limit + limit // 4``).
    seed : int
        Seed of the candidate stream.

    Returns
    -------
    StreamedBound
    """
    draws = limit + limit // 4 if draws is None else draws
    words = random_weight_words(m, w, draws, seed)
    kept, hist = greedy_gap_code(words, min_gap, limit)
    return histogram_bound(hist, len(kept))


def random_streamed_code(
    m: int, w: int, min_gap: int, limit: int, draws: int = RANDOM_DRAWS, seed: int = 0
) -> np.ndarray:
    """``codes.random_code(m, w, 2 * min_gap, limit, draws, seed)`` in one pass.

    ``random_code`` re-filters its kept words with every chunk of candidates; this
    single greedy pass keeps the same words (tested) in ``O(draws * limit)``.

    Returns
    -------
    numpy.ndarray of uint8, shape (n, m)
    """
    words = random_weight_words(m, w, draws, seed)
    kept, _ = greedy_gap_code(words, min_gap, limit)
    return words[kept]


def streamed_code_bound(code: np.ndarray, eps: float = LIMIT) -> tuple[float, int, int]:
    """:func:`streamed_bound` as ``code_bound``'s ``(value, pairs, certified rank)``."""
    res = streamed_bound(code, eps)
    return res.value, res.words, res.certified_rank
