"""The gap histogram of a code (``certify/streamed.py``) against NumPy, same run.

Run: python benchmarks/bench_streamed.py [--words 16384] [--m 64]

``sketchsim bound`` sums Lemma 4 over the histogram of the ``n(n-1)`` pair gaps
``|c' \\ c|`` of a constant-weight code.  Three ways to count it on the same
random weight-``m/2`` words (results asserted equal):

- ``gap_histogram``: the jitted one-word kernel (LLVM ``ctpop``, each unordered
  pair once);
- the NumPy a user would write: pack each word into a ``uint64``, then
  ``np.bitwise_count`` of ``w[i:i+B, None] & w[None, :]`` and ``np.bincount``,
  in row blocks of 1,024 (every ordered pair);
- the dense matrix product ``(1 - C) @ C.T`` (``dense_histogram``),
  only for ``--dense-words`` words (``n^2`` int64 entries).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from ratios import best_of, report  # noqa: E402

from sketchsim.certify.streamed import gap_histogram  # noqa: E402


def numpy_histogram(code: np.ndarray, block: int = 1024) -> np.ndarray:
    """What a user would write: packed words, bitwise_count in row blocks."""
    n, m = code.shape
    w = (code.astype(np.uint64) << np.arange(m, dtype=np.uint64)).sum(axis=1, dtype=np.uint64)
    weight = code.sum(axis=1, dtype=np.int64)
    hist = np.zeros(m + 1, np.int64)
    for i in range(0, n, block):
        common = np.bitwise_count(w[i : i + block, None] & w[None, :]).astype(np.int64)
        gap = weight[None, :] - common  # |c' \ c| = |c'| - |c & c'|
        hist += np.bincount(gap.ravel(), minlength=m + 1)
    hist[0] -= n  # the diagonal
    return hist


def dense_histogram(code: np.ndarray) -> np.ndarray:
    """The dense ``n x n`` product ``(1 - C) @ C.T`` (``gap[c, c'] = |c' \\ c|``), off-diagonal."""
    code = code.astype(np.int64)
    gaps = (1 - code) @ code.T
    off = ~np.eye(code.shape[0], dtype=bool)
    return np.bincount(gaps[off], minlength=code.shape[1] + 1).astype(np.int64)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--words", type=int, default=16384)
    ap.add_argument("--m", type=int, default=64)
    ap.add_argument("--dense-words", type=int, default=2048)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    order = np.argsort(rng.random((args.words, args.m)), axis=1)[:, : args.m // 2]
    code = np.zeros((args.words, args.m), np.uint8)
    np.put_along_axis(code, order, 1, axis=1)
    gap_histogram(code[:8])  # compile or load the cache
    ours = gap_histogram(code)
    assert np.array_equal(ours, numpy_histogram(code))
    small = code[: args.dense_words]
    assert np.array_equal(gap_histogram(small), dense_histogram(small))
    pairs = args.words * (args.words - 1)
    rows = [
        (
            f"{args.words:,} words, m = {args.m} ({pairs:,} pairs)",
            best_of(lambda: gap_histogram(code), 3),
            "NumPy bitwise_count blocks",
            best_of(lambda: numpy_histogram(code), 3),
        ),
        (
            f"{args.dense_words:,} words, m = {args.m}",
            best_of(lambda: gap_histogram(small), 3),
            "NumPy dense (1-C) @ C.T",
            best_of(lambda: dense_histogram(small), 3),
        ),
    ]
    report("bench_streamed", rows)


if __name__ == "__main__":
    main()
