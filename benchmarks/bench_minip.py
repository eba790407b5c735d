"""Min-IP targets from 0/1 bytes: sketchsim against the NumPy and torch a user would write.

Run: python benchmarks/bench_minip.py [--quick] [--repeats R]

Peers, each given the same (B, N, m) uint8 array and timed in this run (min of R):
``np.packbits`` + ``np.bitwise_count`` on all pairs, ``torch.bmm`` on an array
already cast to float32 (the cast is not timed), and an int32 ``einsum`` Gram
matrix.  All four results are checked equal.  The roofline is the faster of two
AND + popcount + add loops over L1-resident words, on one thread and on every
numba thread: the loop numba writes (LLVM vectorises it 256 bits wide) and an explicit 512-bit one
(``vpandq`` / ``vpopcntq`` / ``vpaddq``, four independent sums).  The packed
kernel (``minip_targets_packed``) is rated by the word ANDs it performs, each
pair ``i < j`` once (it never counts a pair twice or a self term), against the
best roofline on up to as many threads as it runs on (one thread for calls small
enough to skip the thread pool; when other processes hold a core, two threads
can measure slower than one), the two timed in turns so that both see the same
moments of a shared machine (3 x repeats turns, more for sub-millisecond kernels:
the best of each).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from contextlib import contextmanager

import numba
import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ratios import best_of, report  # noqa: E402

from sketchsim import minip_targets, pack_bits  # noqa: E402
from sketchsim.minip.bits import popcount64  # noqa: E402
from sketchsim.minip.kernel import (  # noqa: E402
    _LONG_N,
    _run_serially,
    minip_targets_packed,
    uses_lanes,
)

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


@njit(cache=True)
def _and_popcount_roof_serial(a, b, reps):
    """The same loop on the calling thread (an OpenMP region before a serial kernel
    leaves its workers spinning on the core the kernel needs)."""
    total = np.zeros(a.shape[0], dtype=np.int64)
    for t in range(a.shape[0]):
        s = 0
        for _ in range(reps):
            for k in range(a.shape[1]):
                s += popcount64(a[t, k] & b[t, k])
        total[t] = s
    return total


@intrinsic
def _and_popcount_512(typingctx, a, b, row):
    """sum_k popcount(a[row, k] & b[row, k]), 32 words per step in four 512-bit sums."""
    sig = types.int64(a, b, types.intp)

    def codegen(context, builder, signature, args):
        vec = ir.VectorType(ir.IntType(64), 8)
        ctpop = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(vec, [vec]), "llvm.ctpop.v8i64"
        )
        arrays = [
            context.make_array(t)(context, builder, value=v)
            for t, v in zip(signature.args[:2], args[:2], strict=True)
        ]
        width = builder.extract_value(arrays[0].shape, 1)
        first = builder.mul(args[2], width)
        sums = [cgutils.alloca_once_value(builder, ir.Constant(vec, [0] * 8)) for _ in range(4)]
        with cgutils.for_range(builder, builder.sdiv(width, ir.Constant(width.type, 32))) as step:
            base = builder.add(first, builder.mul(step.index, ir.Constant(width.type, 32)))
            for s, acc in enumerate(sums):
                at = builder.add(base, ir.Constant(width.type, 8 * s))
                x, y = (
                    builder.load(
                        builder.bitcast(builder.gep(arr.data, [at]), vec.as_pointer()), align=64
                    )
                    for arr in arrays
                )
                ones = builder.call(ctpop, [builder.and_(x, y)])
                builder.store(builder.add(builder.load(acc), ones), acc)
        total = builder.add(
            builder.add(builder.load(sums[0]), builder.load(sums[1])),
            builder.add(builder.load(sums[2]), builder.load(sums[3])),
        )
        result = builder.extract_element(total, ir.Constant(ir.IntType(32), 0))
        for k in range(1, 8):
            result = builder.add(
                result, builder.extract_element(total, ir.Constant(ir.IntType(32), k))
            )
        return result

    return sig, codegen


@njit(parallel=True, cache=True)
def _and_popcount_roof_512(a, b, reps):
    total = np.zeros(a.shape[0], dtype=np.int64)
    for t in prange(a.shape[0]):
        s = 0
        for _ in range(reps):
            s += _and_popcount_512(a, b, t)
        total[t] = s
    return total


@njit(cache=True)
def _and_popcount_roof_512_serial(a, b, reps):
    total = np.zeros(a.shape[0], dtype=np.int64)
    for t in range(a.shape[0]):
        s = 0
        for _ in range(reps):
            s += _and_popcount_512(a, b, t)
        total[t] = s
    return total


def _aligned_words(rng, rows: int, width: int) -> np.ndarray:
    raw = rng.integers(0, 2**63, rows * width + 8, dtype=np.uint64)
    skip = (-raw.ctypes.data % 64) // 8
    return raw[skip : skip + rows * width].reshape(rows, width)


class Roofline:
    """AND + popcount + add over L1-resident words on ``threads`` threads, both loops
    (on the calling thread for one thread, as the serial kernel runs).

    ``times()`` runs each loop once and returns their wall times; ``rate(t)`` turns
    the better of them into word pairs/s.  Results are checked against NumPy.
    """

    reps = 20_000

    def __init__(self, threads: int):
        self.threads = threads
        rng = np.random.default_rng(0)
        self.a = _aligned_words(rng, threads, 512)
        self.b = _aligned_words(rng, threads, 512)
        expected = np.bitwise_count(self.a & self.b).sum(axis=1)
        if threads == 1:
            self.loops = (_and_popcount_roof_serial, _and_popcount_roof_512_serial)
        else:
            self.loops = (_and_popcount_roof, _and_popcount_roof_512)
        with self._threads():
            for loop in self.loops:
                np.testing.assert_array_equal(loop(self.a, self.b, 1), expected)

    @contextmanager
    def _threads(self):
        previous = numba.get_num_threads()
        numba.set_num_threads(self.threads)
        try:
            yield
        finally:
            numba.set_num_threads(previous)

    def times(self) -> tuple[float, float]:
        """Seconds of one call of the numba loop and of the 512-bit loop."""
        out = []
        with self._threads():
            for loop in self.loops:
                start = time.perf_counter()
                loop(self.a, self.b, self.reps)
                out.append(time.perf_counter() - start)
        return out[0], out[1]

    def rate(self, seconds: float) -> float:
        return self.threads * 512 * self.reps / seconds


def interleaved(kernel, roofs: list[Roofline], repeat: int) -> tuple[float, float]:
    """Best kernel time and the best roofline rate of ``roofs`` (both loops of each), timed in
    turns so that they see the same moments of a shared machine."""
    best_kernel = np.inf
    best_rate = 0.0
    for _ in range(repeat):
        for roof in roofs:
            best_rate = max(best_rate, *(roof.rate(t) for t in roof.times()))
        start = time.perf_counter()
        kernel()
        best_kernel = min(best_kernel, time.perf_counter() - start)
    return best_kernel, best_rate


def _turns(kernel, repeat: int) -> int:
    """Turns for :func:`interleaved`: 3 x repeats, and for sub-millisecond kernels as many
    as 20 ms of kernel time (up to 200), as their best time needs more tries to find a
    quiet moment."""
    start = time.perf_counter()
    kernel()
    once = time.perf_counter() - start
    return int(min(200, max(3 * repeat, 0.02 / max(once, 1e-6))))


def packed_word_ands(B: int, N: int, nw: int) -> int:
    """Word ANDs ``minip_targets_packed`` performs: each pair ``i < j`` once (eight-lane
    blocks, and one sequence at a time below _LONG_N), all N^2 in the one-at-a-time
    long path."""
    once = N > 1 and (uses_lanes(N, nw) or N < _LONG_N)
    pairs = N * (N - 1) // 2 if once else N * N
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
    roofs = [Roofline(threads) for threads in sorted({1, numba.get_num_threads()})]
    for roof in roofs:
        times = np.array([roof.times() for _ in range(3 * args.repeats)])
        t_loop, t_512 = times.min(axis=0)
        print(
            f"AND+popcount roofline, {roof.threads} thread(s): numba loop "
            f"{roof.rate(t_loop) / 1e9:.2f} G word pairs/s, explicit 512-bit loop "
            f"{roof.rate(t_512) / 1e9:.2f} G"
        )
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
        nw = W.shape[-1]
        # rated against the best roofline of up to the threads the kernel runs on (on a
        # shared machine two threads can be slower than one), timed in turns with it
        threads = 1 if _run_serially(W.nbytes, B * N * N * nw) else numba.get_num_threads()
        turns = _turns(lambda W=W: minip_targets_packed(W), args.repeats)
        t_packed, roof = interleaved(
            lambda W=W: minip_targets_packed(W),
            [r for r in roofs if r.threads <= threads],
            turns,
        )
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
        rate = packed_word_ands(B, N, nw) / t_packed
        print(
            f"  {shape:<18} bytes {t_ours * 1e3:8.2f} ms, packed kernel {t_packed * 1e3:8.2f} ms "
            f"= {rate / 1e9:5.2f} G word ANDs/s on {threads} thread(s) ({rate / roof:4.0%} of "
            f"the roofline, {roof / 1e9:.2f} G in turns)"
        )
        if threads > 1:  # the per-thread efficiency, without the thread pool
            previous = numba.get_num_threads()
            numba.set_num_threads(1)  # minip_targets_packed then runs on the calling thread
            try:
                t_one, roof_one = interleaved(lambda W=W: minip_targets_packed(W), roofs[:1], turns)
            finally:
                numba.set_num_threads(previous)
            rate = packed_word_ands(B, N, nw) / t_one
            print(
                f"  {'':<18} {'':<17} on 1 thread  {t_one * 1e3:8.2f} ms "
                f"= {rate / 1e9:5.2f} G word ANDs/s on 1 thread(s) ({rate / roof_one:4.0%} of "
                f"the roofline, {roof_one / 1e9:.2f} G in turns)"
            )
    report("bench_minip", rows)
    return rows


if __name__ == "__main__":
    main()
