"""Exhaustive verification of the THEORY section 3 constructions.

Input number ``idx`` in ``[0, 2^(m N))`` has token ``j`` equal to bits
``j*m .. j*m + m - 1`` of ``idx`` (element ``k`` of a token is its bit ``k``).

Every head of section 3 sees an input only through its Gram matrix
``G_ij = <x_i, x_j>``, and ``G`` depends only on how many of the ``m`` bit
positions carry each *column type* ``c in {0,1}^N`` (the N bits at one
position): ``G_ij = sum_c n_c c_i c_j``.  So instead of the ``2^(m N)`` inputs,
:func:`verify` evaluates each of the ``C(m + 2^N - 1, 2^N - 1)`` count vectors
``n`` once (6,435 at m = 8, N = 3) and weighs it by the number of inputs that
have it, the multinomial ``m! / prod_c n_c!``.  The arithmetic per position is
the plain one, with keys summed in order ``0 .. N-1``, so the maximum error is
bit-identical to evaluating every input (``tests/naive.py``).  The smallest
wrong ``idx`` of a count vector puts the column types in decreasing order
(read as ``N``-bit numbers, token ``N-1`` most significant) at positions
``0, 1, ..., m-1``: the highest bits of the last token then hold its zeros.
Where the count vectors would not be fewer (large N), and for ranges of the
index space (cluster shards), the jitted enumeration of
:mod:`sketchsim.heads.exhaustive_kernel` checks every input.  The first counterexample
is re-evaluated through the NumPy feature maps of :mod:`sketchsim.heads.attention`.
"""

from __future__ import annotations

import math
import signal
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import asdict, dataclass

import numpy as np

from sketchsim import config
from sketchsim.errors import SketchsimError
from sketchsim.estimates import duration_words
from sketchsim.heads.attention import make_construction

__all__ = [
    "VerifyResult",
    "VerifyInterrupted",
    "verify",
    "decode_input",
    "check_verify_size",
    "uses_count_vectors",
    "verify_result",
    "check_range",
    "count_patterns",
]

#: Count vectors times squared column types (the cost of building the vectors
#: and their Gram matrices); beyond this ``verify`` enumerates inputs instead.
_PATTERN_CELLS = 1 << 25


def __getattr__(name):
    # the jitted enumeration's private names, for callers that shard it
    if name in ("_KIND", "_verify_range"):
        from sketchsim.heads import exhaustive_kernel as kernel

        return {"_KIND": kernel.KIND, "_verify_range": kernel._verify_range}[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def check_range(
    construction: str, m: int, n: int, beta: float, causal: bool, start: int, count: int
):
    """Check enumeration positions ``start .. start + count - 1`` with the jitted kernel.

    Positions follow :mod:`sketchsim.heads.exhaustive_kernel` (the last token fastest); any
    split of ``[0, 2^(m n))`` merges to the whole by max, sum and smallest index.

    Returns
    -------
    tuple (max_abs_error, exact_inputs, first_bad)
        ``first_bad`` is the smallest wrong input index ``idx`` in the range, or -1.
    """
    from sketchsim.heads.exhaustive_kernel import check_range as kernel_check_range

    return kernel_check_range(construction, m, n, beta, causal, start, count)


def _n_count_vectors(m: int, n: int) -> int:
    return math.comb(m + (1 << n) - 1, (1 << n) - 1) if n < 40 else math.inf


def uses_count_vectors(m: int, n: int) -> bool:
    """Whether :func:`verify` checks ``2^(m n)`` inputs through their count vectors.

    True when the vectors and their Gram entries fit ``_PATTERN_CELLS`` (then
    the whole check takes well under a second at any ``m n`` up to 62, the
    width of the exact input counts); otherwise every input is enumerated.
    """
    return 1 <= m <= 26 and m * n <= 62 and _n_count_vectors(m, n) << (2 * n) <= _PATTERN_CELLS


def _count_vectors(m: int, n_types: int) -> np.ndarray:
    """Every vector of ``n_types`` non-negative counts summing to ``m``, one row per type.

    Returns an int8 array of shape (n_types, V) (``m <= 26``), in the order of a
    depth-first walk that fixes the count of type 0 first.  Each level records
    only its parent rows; the columns are resolved at the end, one gather per
    type.
    """
    parents, chosen = [], []
    left = np.array([m], dtype=np.int64)
    for _ in range(n_types - 1):
        choices = left + 1
        parent = np.repeat(np.arange(len(left)), choices)
        count = np.arange(choices.sum()) - np.repeat(np.cumsum(choices) - choices, choices)
        parents.append(parent)
        chosen.append(count.astype(np.int8))
        left = left[parent] - count
    rows = np.empty((n_types, len(left)), dtype=np.int8)
    rows[-1] = left
    at = np.arange(len(left))
    for level in range(n_types - 2, -1, -1):
        rows[level] = chosen[level][at]
        at = parents[level][at]
    return rows


def count_patterns(m: int, n: int, construction: str, beta: float = 2.0, causal: bool = False):
    """Check every input through its column-type count vector (see the module docstring).

    Returns
    -------
    tuple (max_abs_error, exact_inputs, first_bad)
        As for the whole index space; ``first_bad`` is the smallest wrong ``idx`` or -1.
    """
    n_types = 1 << n
    counts = _count_vectors(m, n_types)  # (T, V)
    n_vectors = counts.shape[1]
    types = (np.arange(n_types)[:, None] >> np.arange(n)) & 1  # (T, n): bit j = token j
    # G_ij = sum of the counts of the types with bits i and j (symmetric; at most m)
    gram = [[None] * n for _ in range(n)]
    for i in range(n):
        for j in range(i, n):
            both = np.flatnonzero(types[:, i] & types[:, j])
            g = counts[both[0]].astype(np.intp)  # index type: the gathers below take it as is
            for c in both[1:]:
                g += counts[c]
            gram[i][j] = gram[j][i] = g
    weight = np.exp(-beta * np.arange(m + 1, dtype=np.float64))
    vote = weight * np.arange(m + 1)
    if construction != "rank1":  # per unordered pair, used by both of its rows
        votes = {(i, j): vote[gram[i][j]] for i in range(n) for j in range(i, n)}
        weights = {(i, j): weight[gram[i][j]] for i in range(n) for j in range(i, n)}
    ok = np.ones(n_vectors, dtype=bool)
    max_err = 0.0
    for i in [n - 1] if causal else range(n):
        num = np.zeros(n_vectors)
        den = np.zeros(n_vectors)
        for j in range(n):  # keys in order, as a plain evaluation sums them
            if construction == "rank1":
                num = num + (2.0 * gram[i][j] - gram[i][i])
            else:
                pair = (min(i, j), max(i, j))
                num = num + votes[pair]
                den = den + weights[pair]
        with np.errstate(invalid="ignore", divide="ignore"):  # 0/0 is reported below
            y = num / n if construction == "rank1" else num / den
        target = gram[i][0]
        for j in range(1, n):
            target = np.minimum(target, gram[i][j])
        err = np.abs(y - target)
        max_err = max(max_err, float(err.max()))
        ok &= err < config.EXACT_TOLERANCE
    if ok.all():  # the counts' multinomials sum to all 2^(m n) inputs
        return max_err, 1 << (m * n), -1
    bad = counts[:, ~ok].T.astype(np.int64)  # (bad vectors, T)
    # inputs per count vector: m! / prod n_c!, as a product of binomials (exact, < 2^(m n))
    binom = np.array([[math.comb(a, b) for b in range(m + 1)] for a in range(m + 1)])
    wrong_inputs = np.ones(len(bad), dtype=np.int64)
    left = np.full(len(bad), m)
    for c in range(n_types):
        wrong_inputs *= binom[left, bad[:, c]]
        left -= bad[:, c]
    # types in decreasing order at positions 0, 1, ...: type c fills [start_c, start_c + n_c)
    start = np.cumsum(bad[:, ::-1], axis=1)[:, ::-1] - bad
    fill = ((np.int64(1) << bad) - 1) << start
    idx = np.zeros(len(bad), dtype=np.int64)
    for j in range(n):
        idx |= (fill * types[:, j]).sum(axis=1) << (j * m)
    return max_err, (1 << (m * n)) - int(wrong_inputs.sum()), int(idx.min())


def decode_input(idx: int, m: int, n: int) -> np.ndarray:
    """Tokens (n, m) uint8 of enumeration index ``idx``."""
    bits = [(idx >> k) & 1 for k in range(m * n)]
    return np.array(bits, dtype=np.uint8).reshape(n, m)


@dataclass
class VerifyResult:
    """Outcome of an exhaustive check (the JSON keys of ``sketchsim verify``).

    ``checked`` inputs were enumerated (in enumeration order); it equals
    ``inputs`` and ``complete`` is true unless the run was interrupted, in which
    case ``max_abs_error``, ``exact_fraction`` and ``counterexample`` describe
    the checked inputs only.
    """

    m: int
    n: int
    construction: str
    beta: float | None
    rank: int
    causal: bool
    inputs: int
    max_abs_error: float
    exact_fraction: float
    counterexample: dict | None
    seconds: float
    complete: bool = True
    checked: int | None = None

    def __post_init__(self):
        if self.checked is None:
            self.checked = self.inputs

    def to_dict(self) -> dict:
        """The JSON keys of ``sketchsim verify`` (every field)."""
        return asdict(self)

    @property
    def passed(self) -> bool:
        """The verdict: no counterexample among the checked inputs."""
        return self.counterexample is None

    @property
    def softmax_threshold(self) -> float | None:
        """``ln(2(N-1))``, the inverse temperature above which softmax and onehot are exact
        at this length (THEORY section 3b); None for rank1, which has no temperature."""
        from sketchsim.heads.attention import softmax_threshold

        return None if self.construction == "rank1" else softmax_threshold(self.n)


class VerifyInterrupted(KeyboardInterrupt):
    """An interrupted :func:`verify`; ``partial`` holds the result over the finished chunks."""

    def __init__(self, partial: VerifyResult):
        super().__init__(f"interrupted after {partial.checked:,} of {partial.inputs:,} inputs")
        self.partial = partial


def check_verify_size(m: int, n: int) -> None:
    """Refuse sizes the enumeration cannot handle, with an estimate of the time."""
    if m < 1:
        raise SketchsimError(f"m must be >= 1, got {m}")
    if n < 1:
        raise SketchsimError(f"n must be >= 1, got {n}")
    if m * n > config.VERIFY_MAX_BITS and not uses_count_vectors(m, n):
        # cost grows as 2^(m n) inputs times n^2 inner products each
        log2_secs = m * n + math.log2(n * n / (2 * config.VERIFY_RATE_PER_CORE))
        secs = 2.0**log2_secs if log2_secs < 1000 else math.inf
        raise SketchsimError(
            f"m*n = {m * n} exceeds the limit {config.VERIFY_MAX_BITS}: 2^{m * n} inputs "
            f"would take {duration_words(secs)} on 2 cores"
        )


def verify(
    m: int,
    n: int,
    construction: str = "rank1",
    beta: float = 2.0,
    causal: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> VerifyResult:
    """Enumerate all ``2^(m n)`` inputs and check one construction on each.

    Parameters
    ----------
    m, n : int
        Token width and sequence length (``m * n <= 26``, or up to 62 where
        :func:`uses_count_vectors`).
    construction : {"rank1", "softmax", "onehot"}
    beta : float
        Inverse temperature of ``softmax`` and ``onehot`` (ignored by ``rank1``).
    causal : bool
        Score only the final position.
    progress : callable, optional
        Called as ``progress(done, total)`` after each chunk.

    Returns
    -------
    VerifyResult

    Raises
    ------
    VerifyInterrupted
        On SIGINT (Ctrl-C), after the running chunk; it carries the partial result.
    """
    check_verify_size(m, n)
    try:
        head = make_construction(construction, m, beta)
    except ValueError as exc:
        raise SketchsimError(str(exc)) from None
    total = 1 << (m * n)
    start_time = time.perf_counter()
    max_err, exact, first_bad, checked = 0.0, 0, -1, 0
    if uses_count_vectors(m, n):
        max_err, exact, first_bad = count_patterns(m, n, construction, beta, causal)
        checked = total
        if progress is not None:
            progress(total, total)
    with _deferred_interrupt() as interrupted:
        # at most 8 parallel calls: each ends on a barrier that costs tens of
        # milliseconds when other processes hold the cores
        step = max(config.VERIFY_CHUNK, total >> 3)
        for start in range(checked, total, step):
            count = min(step, total - start)
            errs, n_exact, bad = check_range(construction, m, n, beta, causal, start, count)
            max_err = max(max_err, errs)
            exact += n_exact
            checked += count
            if bad >= 0 and (first_bad < 0 or bad < first_bad):
                first_bad = bad
            if interrupted():
                break
            if progress is not None:
                progress(start + count, total)
    result = verify_result(
        head, construction, m, n, beta, causal, max_err, exact, checked, first_bad, start_time
    )
    if interrupted():
        raise VerifyInterrupted(result)
    return result


def verify_result(
    head, construction, m, n, beta, causal, max_err, exact, checked, first_bad, start_time
) -> VerifyResult:
    """The :class:`VerifyResult` of ``checked`` inputs (the first ones of ``2^(m n)``).

    ``first_bad`` is the smallest wrong input (-1: none), re-evaluated through
    the NumPy feature maps; ``start_time`` is the ``time.perf_counter()`` the
    run started at.
    """
    total = 1 << (m * n)
    counterexample = None
    if first_bad >= 0:
        counterexample = describe_counterexample(head, first_bad, m, n, causal)
    return VerifyResult(
        m=m,
        n=n,
        construction=construction,
        beta=None if construction == "rank1" else float(beta),
        rank=head.rank,
        causal=causal,
        inputs=total,
        max_abs_error=max_err,
        exact_fraction=exact / checked if checked else 0.0,
        counterexample=counterexample,
        seconds=time.perf_counter() - start_time,
        complete=checked == total,
        checked=checked,
    )


@contextmanager
def _deferred_interrupt():
    """Hold SIGINT until the running chunk is finished; yields ``interrupted()``.

    A KeyboardInterrupt raised inside a parallel numba kernel surfaces as a
    ``SystemError``; deferring it to chunk boundaries keeps the finished chunks.
    Outside the main thread (where handlers cannot be set) nothing is deferred.
    """
    if threading.current_thread() is not threading.main_thread():
        yield lambda: False
        return
    hits = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: hits.append(signum))
    try:
        yield lambda: bool(hits)
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler if previous is None else previous)


def describe_counterexample(head, idx: int, m: int, n: int, causal: bool) -> dict:
    """Re-evaluate a wrong input with the NumPy feature maps and name its first bad position."""
    X = decode_input(idx, m, n)
    y = head.evaluate(X[None], causal=causal)[0]
    t = (X.astype(np.int64) @ X.T.astype(np.int64)).min(axis=1)
    positions = [n - 1] if causal else list(range(n))
    for k, pos in enumerate(positions):
        if not abs(y[k] - t[pos]) < 0.5:
            return {
                "index": idx,
                "tokens": X.tolist(),
                "position": pos + 1,
                "target": int(t[pos]),
                "output": float(y[k]),
            }
    raise AssertionError(  # the jitted and NumPy paths disagree: a bug, not bad input
        f"input {idx} was wrong in the jitted kernel but right in the NumPy reference"
    )
