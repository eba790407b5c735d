"""Min-IP targets ``t_i = min_j <x_i, x_j>`` (THEORY section 1).

Each pair ``<x_i, x_j> = sum_w popcount(x_i[w] & x_j[w])`` is counted once.
From ``N = 4`` on, the kernel works on blocks of eight sequences at a time: the
block is transposed lane-major so that one 512-bit vector holds the same word of
all eight, and a pair is counted for the eight sequences by whole-vector
``AND`` / ``vpopcntq`` / ``add`` (:mod:`sketchsim.minip.lanes`).  ``N <= 3`` is counted
in scalar code (``N = 3`` unrolled).  Sequences whose lane block would take
over 2 MiB fall back to one sequence at a time: pairs once below ``N = 32``, and
above it each row against all keys in a loop LLVM vectorises.
Packing from 0/1 bytes reads eight bytes at a time and gathers their low bits
with one multiply (:data:`sketchsim.minip.bits.GATHER_MAGIC`).  Batches are split into
chunks scheduled dynamically over the threads, so a busy core does not hold the
others up.
"""

from __future__ import annotations

from contextlib import contextmanager

import numba
import numpy as np
from numba import njit, prange

from sketchsim.minip.bits import as_binary, gather8, load_u64, popcount64
from sketchsim.minip.lanes import (
    LANES,
    lane_row_minima,
    prefetch_words,
    transpose8,
    transpose_lanes,
)

__all__ = ["minip_targets", "minip_targets_packed"]

#: Packed words per parallel task (sequences x tokens x words): tasks are small
#: enough to stay in L2 and many enough that two threads share a batch evenly
#: when one core is busy.
_TASK_WORDS = 1 << 14
#: From this length on, sequences are counted eight at a time (lane-major blocks).
_LANE_MIN_N = 4
#: ... while a block's lane-major copy (8 x N x words) is at most 2 MiB (measured
#: 1.4x to 4.7x faster than one sequence at a time up to 8 x 128 x 64 words).
_LANE_SCRATCH_WORDS = 1 << 18
#: Without lanes, from this length on rows are counted against all keys at once
#: (vectorised over keys); shorter sequences count each pair once, in scalar code.
_LONG_N = 32
_HIGH_BITS = np.uint64(0xFEFEFEFEFEFEFEFE)
#: Calls this small (input bytes and word pairs) run on the calling thread.
_SERIAL_BYTES = 1 << 25
_SERIAL_WORD_PAIRS = 1 << 25

# Kernel layout: the parallel loop runs over tasks; each task calls the helpers
# below once, on a range of sequences.  Array arguments cost numba a reference
# count per call, so no helper taking arrays is called per sequence or token.


@njit(cache=True)
def _pack_range(flat, m, first, count, Q):
    """Pack sequences ``first .. first + count`` of 0/1 bytes into ``Q[seq, token, word]``.

    ``flat`` holds the (B, N, m) bytes in C order.  Eight bytes are read at a
    time and their low bits gathered by one multiply (``gather8``).  Returns the
    OR of every byte group read: a bit outside the lowest of each byte is set
    iff some byte was neither 0 nor 1.
    """
    n = Q.shape[1]
    seen = np.uint64(0)
    n_full = m >> 6
    rest = m - 64 * n_full
    n_groups = rest >> 3
    r = rest & 7
    for s in range(count):
        for i in range(n):
            base = ((first + s) * n + i) * m
            for w in range(n_full):
                p = base + 64 * w
                v0 = load_u64(flat, p)
                v1 = load_u64(flat, p + 8)
                v2 = load_u64(flat, p + 16)
                v3 = load_u64(flat, p + 24)
                v4 = load_u64(flat, p + 32)
                v5 = load_u64(flat, p + 40)
                v6 = load_u64(flat, p + 48)
                v7 = load_u64(flat, p + 56)
                seen |= v0 | v1 | v2 | v3 | v4 | v5 | v6 | v7
                Q[s, i, w] = (
                    gather8(v0)
                    | (gather8(v1) << np.uint64(8))
                    | (gather8(v2) << np.uint64(16))
                    | (gather8(v3) << np.uint64(24))
                    | (gather8(v4) << np.uint64(32))
                    | (gather8(v5) << np.uint64(40))
                    | (gather8(v6) << np.uint64(48))
                    | (gather8(v7) << np.uint64(56))
                )
            if rest > 0:  # the last, partial word
                # Up to 7 groups, written out: as a loop, LLVM vectorises it with
                # masked loads and reductions that cost more than the packing.
                p = base + 64 * n_full
                word = np.uint64(0)
                if n_groups > 0:
                    v = load_u64(flat, p)
                    seen |= v
                    word |= gather8(v)
                if n_groups > 1:
                    v = load_u64(flat, p + 8)
                    seen |= v
                    word |= gather8(v) << np.uint64(8)
                if n_groups > 2:
                    v = load_u64(flat, p + 16)
                    seen |= v
                    word |= gather8(v) << np.uint64(16)
                if n_groups > 3:
                    v = load_u64(flat, p + 24)
                    seen |= v
                    word |= gather8(v) << np.uint64(24)
                if n_groups > 4:
                    v = load_u64(flat, p + 32)
                    seen |= v
                    word |= gather8(v) << np.uint64(32)
                if n_groups > 5:
                    v = load_u64(flat, p + 40)
                    seen |= v
                    word |= gather8(v) << np.uint64(40)
                if n_groups > 6:
                    v = load_u64(flat, p + 48)
                    seen |= v
                    word |= gather8(v) << np.uint64(48)
                if r > 0 and m >= 8:
                    # the token's last 8 bytes, shifted so that only its final r remain
                    v = load_u64(flat, base + m - 8) >> np.uint64(64 - 8 * r)
                    seen |= v
                    word |= gather8(v) << np.uint64(8 * n_groups)
                elif r > 0:  # m < 8: byte by byte
                    for k in range(r):
                        v = np.uint64(flat[p + k])
                        seen |= v
                        word |= (v & np.uint64(1)) << np.uint64(k)
                Q[s, i, n_full] = word
    return seen


@njit(cache=True)
def uses_lanes(n, nw):
    """Whether sequences of ``n`` tokens of ``nw`` words are counted eight at a time."""
    return n >= _LANE_MIN_N and LANES * n * nw <= _LANE_SCRATCH_WORDS


@njit(cache=True)
def _scratch(n, nw):
    """Scratch for :func:`_row_minima`: a flat uint64 block and int64 minima, 64-byte aligned."""
    size = max(LANES * n * nw, n * nw)
    raw = np.empty(size + LANES, dtype=np.uint64)
    skip = ((-raw.ctypes.data) % 64) // 8
    raw_mins = np.empty(LANES * n + LANES, dtype=np.int64)
    skip_mins = ((-raw_mins.ctypes.data) % 64) // 8
    return raw[skip : skip + size], raw_mins[skip_mins : skip_mins + LANES * n]


@njit(cache=True)
def _lane_blocks(W, lo, hi, out, shift, P, mins):
    """Row minima of ``W[lo:hi]`` eight sequences at a time (lane-major, THEORY section 1).

    Self terms are skipped: for ``N >= 2``, ``<x_i, x_j> <= <x_i, x_i>``.  The
    last block may be partial; its missing lanes are zero and not written out.
    """
    n, nw = W.shape[1], W.shape[2]
    K = n * nw  # words of one sequence
    k_vec = K - K % LANES  # transposed eight columns at a time
    # words of the next block prefetched per row, whole 64-byte lines
    slice_words = LANES * ((LANES * K + LANES * (n - 1) - 1) // (LANES * (n - 1)))
    for b0 in range(lo, hi, LANES):
        lanes = min(LANES, hi - b0)
        if lanes == LANES:
            transpose_lanes(W, P, b0 * K, K)
            for k in range(k_vec, K):
                i = k // nw
                for lane in range(LANES):
                    P[k * LANES + lane] = W[b0 + lane, i, k - i * nw]
        else:
            for k in range(K):
                i = k // nw
                for lane in range(LANES):
                    if lane < lanes:
                        P[k * LANES + lane] = W[b0 + lane, i, k - i * nw]
                    else:
                        P[k * LANES + lane] = 0
        for t in range(n * LANES):
            mins[t] = np.int64(1) << 62
        # the next block's words are fetched a slice per row while this block is
        # counted (a burst of prefetches would stall on the line-fill buffers)
        ahead = (b0 + LANES) * K if b0 + 2 * LANES <= hi else 0
        for i in range(n - 1):
            if ahead > 0:
                prefetch_words(W, ahead + i * slice_words, slice_words)
            lane_row_minima(P, mins, i, n, nw)
        # minima back to sequence-major: 8 x 8 tiles of (token, lane), then the rest
        tokens_vec = n - n % LANES if lanes == LANES else 0
        for i0 in range(0, tokens_vec, LANES):
            transpose8(mins, i0 * LANES, LANES, out, (b0 + shift) * n + i0, n, 1)
        for lane in range(lanes):
            for i in range(tokens_vec, n):
                out[b0 + lane + shift, i] = mins[i * LANES + lane]


@njit(cache=True)
def _row_minima(W, lo, hi, out, shift, P, mins):
    """``out[b + shift, i] = min_j <x_i, x_j>`` for the packed sequences ``W[lo:hi]``.

    Each pair is counted once for ``N < 32`` and for lane blocks; for ``N >= 2``
    the self term is skipped, as ``<x_i, x_j> <= <x_i, x_i>`` (THEORY section 1).
    Long sequences without lanes are copied word-major into ``P[w * N + token]``
    so that the innermost loop, over keys, vectorises.  ``P`` and ``mins`` come
    from :func:`_scratch`.
    """
    n, nw = W.shape[1], W.shape[2]
    if uses_lanes(n, nw):
        _lane_blocks(W, lo, hi, out, shift, P, mins)
        return
    for b in range(lo, hi):
        o = b + shift
        if n == 1:
            c = 0
            for w in range(nw):
                c += popcount64(W[b, 0, w])
            out[o, 0] = c
        elif n == 3:  # the paper's length, unrolled
            c01 = 0
            c02 = 0
            c12 = 0
            for w in range(nw):
                a0 = W[b, 0, w]
                a1 = W[b, 1, w]
                a2 = W[b, 2, w]
                c01 += popcount64(a0 & a1)
                c02 += popcount64(a0 & a2)
                c12 += popcount64(a1 & a2)
            out[o, 0] = min(c01, c02)
            out[o, 1] = min(c01, c12)
            out[o, 2] = min(c02, c12)
        elif n < _LONG_N:
            for j in range(n):
                mins[j] = np.int64(1) << 62  # running minima
            for i in range(n - 1):
                best = mins[i]
                for j in range(i + 1, n):
                    c = 0
                    for w in range(nw):
                        c += popcount64(W[b, i, w] & W[b, j, w])
                    best = min(best, c)
                    mins[j] = min(mins[j], c)
                out[o, i] = best
            out[o, n - 1] = mins[n - 1]
        else:
            for i in range(n):
                for w in range(nw):
                    P[w * n + i] = W[b, i, w]
            for i in range(n):
                for j in range(n):
                    mins[j] = 0
                for w in range(nw):
                    a = P[w * n + i]
                    for j in range(n):
                        mins[j] += popcount64(a & P[w * n + j])
                best = mins[0]
                for j in range(1, n):
                    best = min(best, mins[j])
                out[o, i] = best


def _task_size(n: int, nw: int) -> int:
    """Sequences per parallel task; whole lane blocks where lanes are used."""
    per_task = max(1, _TASK_WORDS // (n * nw))
    if uses_lanes(n, nw):
        per_task = LANES * max(1, per_task // LANES)
    return per_task


@njit(parallel=True, cache=True)
def _minip_packed(W, per_task):
    B, N, nw = W.shape
    out = np.empty((B, N), dtype=np.int64)
    n_tasks = (B + per_task - 1) // per_task
    for task in prange(n_tasks):
        P, mins = _scratch(N, nw)
        lo = task * per_task
        _row_minima(W, lo, min(B, lo + per_task), out, 0, P, mins)
    return out


@njit(parallel=True, cache=True)
def _minip_bytes(X, per_task):
    """Targets straight from C-contiguous 0/1 bytes (B, N, m), packed task by task.

    Returns the targets and whether some entry was neither 0 nor 1.
    """
    B, N, m = X.shape
    flat = X.reshape(-1)
    nw = (m + 63) // 64
    out = np.empty((B, N), dtype=np.int64)
    n_tasks = (B + per_task - 1) // per_task
    seen = np.zeros(max(n_tasks, 1), dtype=np.uint64)
    for task in prange(n_tasks):
        Q = np.empty((per_task, N, nw), dtype=np.uint64)
        P, mins = _scratch(N, nw)
        lo = task * per_task
        count = min(B, lo + per_task) - lo
        seen[task] = _pack_range(flat, m, lo, count, Q)
        _row_minima(Q, 0, count, out, lo, P, mins)
    bad = np.uint64(0)
    for task in range(seen.shape[0]):
        bad |= seen[task]
    return out, (bad & _HIGH_BITS) != 0


def _run_serially(n_bytes: int, word_pairs: int) -> bool:
    """Small calls skip the thread pool: waking a worker costs more than the work
    (and tens of milliseconds when other processes hold the cores)."""
    return (
        n_bytes <= _SERIAL_BYTES and word_pairs <= _SERIAL_WORD_PAIRS
    ) or numba.get_num_threads() == 1


@contextmanager
def dynamic_schedule():
    """Hand out parallel tasks one at a time (numba's chunk size 1) during a call."""
    previous = numba.set_parallel_chunksize(1)
    try:
        yield
    finally:
        numba.set_parallel_chunksize(previous)


def minip_targets_packed(W) -> np.ndarray:
    """Min-IP targets for packed tokens ``W`` of shape (B, N, words); returns (B, N) int64."""
    W = np.ascontiguousarray(W, dtype=np.uint64)
    if W.ndim != 3:
        raise ValueError(f"packed tokens must have shape (B, N, words), got {W.shape}")
    B, N, nw = W.shape
    if _run_serially(B * N * nw * 8, B * N * N * nw):
        out = np.empty((B, N), dtype=np.int64)
        _row_minima(W, 0, B, out, 0, *_scratch(N, nw))
        return out
    with dynamic_schedule():
        return _minip_packed(W, _task_size(N, nw))


def minip_targets(X) -> np.ndarray:
    """Min-IP targets of Boolean token sequences.

    Parameters
    ----------
    X : array_like, shape (B, N, m) or (N, m)
        Bool or integer 0/1 tokens; any ``m >= 1``, ``N >= 1``, ``B >= 0``.

    Returns
    -------
    numpy.ndarray of int64, shape (B, N) or (N,)
        ``t[b, i] = min_j <X[b, i], X[b, j]>`` (``j = i`` included).

    Examples
    --------
    >>> minip_targets([[1, 1, 0], [0, 1, 1], [1, 1, 1]]).tolist()
    [1, 1, 2]
    """
    X = np.asarray(X)
    if X.ndim not in (2, 3):
        raise ValueError(f"X must have shape (B, N, m) or (N, m), got rank {X.ndim}")
    if X.dtype == np.bool_ or X.dtype == np.uint8:
        if X.shape[-1] < 1:
            raise ValueError("X has token width m = 0; m must be >= 1")
        X = X.view(np.uint8)  # validated inside the kernel, no copy
    else:
        X = as_binary(X)
    if X.shape[-2] < 1:
        raise ValueError("X has N = 0 tokens; N must be >= 1")
    single = X.ndim == 2
    X = np.ascontiguousarray(X[None] if single else X)
    B, N, m = X.shape
    nw = (m + 63) // 64
    if _run_serially(X.nbytes, B * N * N * nw):
        Q = np.empty((B, N, nw), dtype=np.uint64)
        t = np.empty((B, N), dtype=np.int64)
        bad = _pack_range(X.reshape(-1), m, 0, B, Q) & _HIGH_BITS
        _row_minima(Q, 0, B, t, 0, *_scratch(N, nw))
    else:
        with dynamic_schedule():
            t, bad = _minip_bytes(X, _task_size(N, nw))
    if bad:
        n_bad = int(np.count_nonzero(X > 1))
        raise ValueError(f"X must hold only 0 and 1, found {n_bad} other entries")
    return t[0] if single else t
