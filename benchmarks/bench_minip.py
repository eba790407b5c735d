"""Min-IP targets from 0/1 bytes: sketchsim against the NumPy and torch a user would write.

Run: python benchmarks/bench_minip.py [--quick] [--repeats R]

Peers, each given the same (B, N, m) uint8 array and timed in this run (min of R):
``np.packbits`` + ``np.bitwise_count`` on all pairs, ``torch.bmm`` on an array
already cast to float32 (the cast is not timed), and an int32 ``einsum`` Gram
matrix.  All four results are checked equal.  The roofline is a jitted AND +
popcount + add loop over L1-resident words on every numba thread; the packed
kernel (``minip_targets_packed``) is rated by the word ANDs it performs.
"""

from __future__ import annotations

import argparse
import os
import sys

import numba
import numpy as np
from numba import njit, prange

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ratios import best_of, report  # noqa: E402

from sketchsim import minip_targets, pack_bits  # noqa: E402
from sketchsim.bits import popcount64  # noqa: E402
from sketchsim.minip import _LONG_N, minip_targets_packed  # noqa: E402

SHAPES = [(200_000, 3, 24), (20_000, 16, 456), (2_000, 64, 456), (100_000, 3, 64), (50_000, 5, 100)]


def numpy_packbits(X: np.ndarray) -> np.ndarray:
    """What a NumPy user writes: pack, AND every pair, count bits, min over keys."""
    P = np.packbits(X, axis=-1)
    G = np.bitwise_count(P[:, :, None, :] & P[:, None, :, :]).sum(axis=-1, dtype=np.int32)
    return G.min(axis=-1)


def numpy_einsum(X: np.ndarray) -> np.ndarray:
    """The plain reference: an integer Gram matrix per sequence, min over keys."""
    X = X.astype(np.int32)
    return np.einsum("bim,bjm->bij", X, X).min(axis=-1)


@njit(parallel=True, cache=True)
def _and_popcount_roof(a, b, reps):
    total = np.zeros(a.shape[0], dtype=np.int64)
    for t in prange(a.shape[0]):
        s = 0
        for _ in range(reps):
            for k in range(a.shape[1]):
                s += popcount64(a[t, k] & b[t, k])
        total[t] = s
    return total


def roofline(repeat: int) -> float:
    """AND + popcount + add throughput (word pairs/s) on L1-resident words, all threads."""
    threads = numba.get_num_threads()
    rng = np.random.default_rng(0)
    a = rng.integers(0, 2**63, (threads, 512), dtype=np.uint64)
    b = rng.integers(0, 2**63, (threads, 512), dtype=np.uint64)
    reps = 20_000
    _and_popcount_roof(a, b, 1)
    return threads * 512 * reps / best_of(lambda: _and_popcount_roof(a, b, reps), repeat)


def packed_word_ands(B: int, N: int, nw: int) -> int:
    """Word ANDs ``minip_targets_packed`` performs: pairs once below _LONG_N, all N^2 above."""
    pairs = N * (N - 1) // 2 if 1 < N < _LONG_N else N * N
    return B * pairs * nw


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="batches 10x smaller")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)
    try:
        import torch
    except ImportError:  # torch is an optional extra
        torch = None
    scale = 10 if args.quick else 1
    rng = np.random.default_rng(0)
    print(
        f"Min-IP targets from 0/1 bytes; numba threads {numba.get_num_threads()}, "
        f"torch threads {torch.get_num_threads() if torch else '-'}"
    )
    roof = roofline(args.repeats)
    print(f"AND+popcount roofline: {roof / 1e9:.2f} G word pairs/s")
    rows = []
    for B, N, m in SHAPES:
        B //= scale
        X = rng.integers(0, 2, (B, N, m), dtype=np.uint8)
        W = pack_bits(X)
        expected = numpy_einsum(X[: max(1, B // 10)])
        ours = minip_targets(X)  # also compiles / loads the cache
        np.testing.assert_array_equal(ours[: len(expected)], expected)
        np.testing.assert_array_equal(numpy_packbits(X), ours)
        np.testing.assert_array_equal(minip_targets_packed(W), ours)
        t_ours = best_of(lambda X=X: minip_targets(X), args.repeats)
        t_packed = best_of(lambda W=W: minip_targets_packed(W), args.repeats)
        shape = f"({B}, {N}, {m})"
        rows.append(
            (
                f"minip {shape}",
                t_ours,
                "np.packbits+bitwise_count",
                best_of(lambda X=X: numpy_packbits(X), args.repeats),
            )
        )
        if torch is not None:
            Xf = torch.from_numpy(X.astype(np.float32))
            got = torch.bmm(Xf, Xf.transpose(1, 2)).min(dim=-1).values.numpy().astype(np.int64)
            np.testing.assert_array_equal(got, ours)
            t_torch = best_of(
                lambda Xf=Xf: torch.bmm(Xf, Xf.transpose(1, 2)).min(dim=-1).values, args.repeats
            )
            rows.append((f"minip {shape}", t_ours, "torch.bmm (pre-cast f32)", t_torch))
        rate = packed_word_ands(B, N, W.shape[-1]) / t_packed
        print(
            f"  {shape:<18} bytes {t_ours * 1e3:8.2f} ms, packed kernel {t_packed * 1e3:8.2f} ms "
            f"= {rate / 1e9:5.2f} G word ANDs/s ({rate / roof:4.0%} of roofline)"
        )
    report("bench_minip", rows)
    return rows


if __name__ == "__main__":
    main()
