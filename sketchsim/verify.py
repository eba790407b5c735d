"""Exhaustive verification of the THEORY section 3 constructions.

Input number ``idx`` in ``[0, 2^(m N))`` has token ``j`` equal to bits
``j*m .. j*m + m - 1`` of ``idx`` (element ``k`` of a token is its bit ``k``).
The jitted kernel uses closed forms of each head; the first counterexample is
re-evaluated through the NumPy feature maps of :mod:`sketchsim.attention`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np
from numba import njit, prange

from sketchsim import config
from sketchsim.attention import make_construction
from sketchsim.bits import popcount64
from sketchsim.errors import SketchsimError
from sketchsim.minip import minip_targets

__all__ = ["VerifyResult", "verify", "decode_input", "check_verify_size"]

_KIND = {"rank1": 0, "softmax": 1, "onehot": 1}
_BLOCKS = 64


@njit(parallel=True, cache=True, fastmath=config.FASTMATH)
def _verify_range(kind, m, n, beta, causal, start, count):
    """Per block: (max |y - t|, number of exact inputs, first wrong index or -1)."""
    mask = (np.int64(1) << m) - 1
    etab = np.exp(-beta * np.arange(m + 1).astype(np.float64))
    per = (count + _BLOCKS - 1) // _BLOCKS
    max_err = np.zeros(_BLOCKS)
    n_exact = np.zeros(_BLOCKS, dtype=np.int64)
    first_bad = np.full(_BLOCKS, -1, dtype=np.int64)
    first_scored = n - 1 if causal else 0
    for blk in prange(_BLOCKS):
        tok = np.empty(n, dtype=np.int64)
        gram = np.empty((n, n), dtype=np.int64)
        lo = start + blk * per
        hi = min(start + count, lo + per)
        for idx in range(lo, hi):
            for j in range(n):
                tok[j] = (idx >> (j * m)) & mask
            for i in range(n):
                for j in range(n):
                    gram[i, j] = popcount64(np.uint64(tok[i] & tok[j]))
            ok = True
            for i in range(first_scored, n):
                t = gram[i, 0]
                for j in range(1, n):
                    if gram[i, j] < t:
                        t = gram[i, j]
                if kind == 0:  # rank1: y = mean_j (2<x_i,x_j> - |x_i|)
                    s = 0.0
                    for j in range(n):
                        s += 2.0 * gram[i, j] - gram[i, i]
                    y = s / n
                else:  # softmax kernel exp(-beta <x_i,x_j>), vote <x_i,x_j>
                    num = 0.0
                    den = 0.0
                    for j in range(n):
                        w = etab[gram[i, j]]
                        num += w * gram[i, j]
                        den += w
                    y = num / den
                err = abs(y - t)
                if err > max_err[blk]:
                    max_err[blk] = err
                if not err < 0.5:
                    ok = False
            if ok:
                n_exact[blk] += 1
            elif first_bad[blk] < 0:
                first_bad[blk] = idx
    return max_err, n_exact, first_bad


def decode_input(idx: int, m: int, n: int) -> np.ndarray:
    """Tokens (n, m) uint8 of enumeration index ``idx``."""
    bits = [(idx >> k) & 1 for k in range(m * n)]
    return np.array(bits, dtype=np.uint8).reshape(n, m)


@dataclass
class VerifyResult:
    """Outcome of an exhaustive check (the JSON keys of ``sketchsim verify``)."""

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

    def to_dict(self) -> dict:
        return asdict(self)


def check_verify_size(m: int, n: int) -> None:
    """Refuse sizes the enumeration cannot handle, with an estimate of the time."""
    if m < 1:
        raise SketchsimError(f"--m must be >= 1, got {m}")
    if n < 1:
        raise SketchsimError(f"--n must be >= 1, got {n}")
    if m * n > config.VERIFY_MAX_BITS:
        # about 4e7 inputs/s at N = 3 on 2 cores (docs/benchmarks.md); cost grows as N^2
        secs = 2.0 ** (m * n) * n * n / 3.6e8
        raise SketchsimError(
            f"m*n = {m * n} exceeds the limit {config.VERIFY_MAX_BITS}: 2^{m * n} inputs "
            f"would take about {_duration(secs)} on 2 cores"
        )


def _duration(secs: float) -> str:
    for unit, size in (("years", 365.25 * 86400), ("days", 86400), ("hours", 3600), ("min", 60)):
        if secs >= 2 * size:
            return f"{secs / size:,.3g} {unit}"
    return f"{secs:.3g} s"


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
        Token width and sequence length (``m * n <= 26``).
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
    """
    check_verify_size(m, n)
    try:
        head = make_construction(construction, m, beta)
    except ValueError as exc:
        raise SketchsimError(str(exc)) from None
    total = 1 << (m * n)
    start_time = time.perf_counter()
    max_err, exact, first_bad = 0.0, 0, -1
    for start in range(0, total, config.VERIFY_CHUNK):
        count = min(config.VERIFY_CHUNK, total - start)
        errs, n_exact, bad = _verify_range(
            _KIND[construction], m, n, float(beta), causal, start, count
        )
        max_err = max(max_err, float(errs.max()))
        exact += int(n_exact.sum())
        if first_bad < 0 and (bad >= 0).any():
            first_bad = int(bad[bad >= 0].min())
        if progress is not None:
            progress(start + count, total)
    counterexample = None
    if first_bad >= 0:
        counterexample = _describe(head, first_bad, m, n, causal)
    return VerifyResult(
        m=m,
        n=n,
        construction=construction,
        beta=None if construction == "rank1" else float(beta),
        rank=head.rank,
        causal=causal,
        inputs=total,
        max_abs_error=max_err,
        exact_fraction=exact / total,
        counterexample=counterexample,
        seconds=time.perf_counter() - start_time,
    )


def _describe(head, idx: int, m: int, n: int, causal: bool) -> dict:
    """Re-evaluate a wrong input with the NumPy feature maps and name its first bad position."""
    X = decode_input(idx, m, n)
    y = head.evaluate(X[None], causal=causal)[0]
    t = minip_targets(X)
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
