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
from numba import njit

__all__ = [
    "group_transcripts",
    "entropy_bits",
    "find_collision_candidates",
    "EntryCounts",
    "EntryTally",
    "EntryBits",
    "entry_bits",
    "entry_ranges",
    "match_answers",
    "merge_triples",
    "value_runs",
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
    # Sort by the first hash alone (one vectorised argsort); inputs with equal first
    # hashes and different second ones (a 64-bit collision) fall back to lexsort.
    # Group ids are ranks of distinct (h1, h2) pairs, so the order among equal
    # pairs does not matter: the result is the lexsort's.
    order = np.argsort(fingerprints[:, 0])
    fp = fingerprints[order]
    new = np.ones(B, dtype=bool)
    same1 = fp[1:, 0] == fp[:-1, 0]
    if (same1 & (fp[1:, 1] != fp[:-1, 1])).any():
        order = np.lexsort((fingerprints[:, 1], fingerprints[:, 0]))
        fp = fingerprints[order]
        new[1:] = (fp[1:] != fp[:-1]).any(axis=1)
    else:
        new[1:] = ~same1
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


def value_runs(tr: np.ndarray, cols: np.ndarray | None = None):
    """``(entry, value, count)`` of columns ``cols`` of ``tr`` (all when None), or None.

    Constant columns (often most: entries the shared tokens alone decide) give one
    triple each without sorting; the others are sorted one column at a time.
    Triples come grouped by kind, not sorted (:meth:`EntryCounts._merge` sorts).
    """
    block = tr if cols is None else tr[:, cols]
    B, E = block.shape
    if B == 0 or E == 0:
        return None
    const = (block == block[0]).all(axis=0)
    fixed = np.flatnonzero(const)
    varying = np.flatnonzero(~const)
    entry = [fixed]
    value = [block[0, fixed]]
    count = [np.full(fixed.size, B, dtype=np.int64)]
    if varying.size:
        st = np.ascontiguousarray(block[:, varying].T)  # (V, B), rows contiguous: sorted in place
        st.sort(axis=1)
        new = np.empty(st.shape, dtype=bool)
        new[:, 0] = True
        new[:, 1:] = st[:, 1:] != st[:, :-1]
        start = np.flatnonzero(new)
        entry.append(varying[start // B])
        value.append(st.reshape(-1)[start])
        count.append(np.diff(np.append(start, st.size)))
    entry = np.concatenate(entry)
    if cols is not None:
        entry = np.asarray(cols, dtype=np.int64)[entry]
    return entry, np.concatenate(value), np.concatenate(count)


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
        self.n += tr.shape[0]
        self._add_columns(tr, None)

    def _add_columns(self, tr: np.ndarray, cols: np.ndarray | None) -> None:
        """Count columns ``cols`` of ``tr`` (all when None) as their entries; ``n`` unchanged."""
        triples = value_runs(tr, cols)
        if triples is not None:
            self._merge(*triples)

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


#: Entries with at most this many possible values are counted in a dense table.
DENSE_VALUES = 1 << 12
#: At most this many dense counters per tally (8 bytes each).
DENSE_TOTAL = 1 << 22


def entry_ranges(layers: np.ndarray, speak: np.ndarray) -> np.ndarray:
    """How many values each transcript entry can take, from the engine's layer table.

    ``layers`` rows are ``[channel code, k, a, levels, first entry, end entry]`` and
    ``speak[lay]`` marks the layer's speakers (see :mod:`sketchsim.sketch.engine`).
    The engine stops on any symbol outside ``0..a-1``, so a ``sum`` entry lies in
    ``0..n(a-1)`` (``0..levels-1`` when clipped), a ``histogram`` entry in
    ``0..n``, a ``concat`` entry in ``0..a-1`` (channels: THEORY section 5).
    Ranges above ``2^62`` are given as ``2^62``.
    """
    from sketchsim.sketch.channels import CHANNEL_CODE

    total = int(layers[:, 5].max()) if layers.shape[0] else 0
    out = np.zeros(total, dtype=np.int64)
    for lay in range(layers.shape[0]):
        chan, k, a, levels, lo, hi = (int(x) for x in layers[lay])
        n = int(speak[lay].sum())
        if chan == CHANNEL_CODE["sum"]:
            size = levels if levels > 0 else n * (a - 1) + 1
        elif chan == CHANNEL_CODE["histogram"]:
            size = n + 1
        else:
            size = a
        out[lo:hi] = min(size, 1 << 62)
    return out


@njit(nogil=True, cache=True)
def _count_dense(tr, rows, cols, sizes, offsets, hist):
    """Add rows ``0..rows-1`` of columns ``cols`` to ``hist``.

    Returns False, with ``hist`` as it was, when a value lies outside ``0..sizes[j]-1``.
    """
    for r in range(rows):
        for j in range(cols.shape[0]):
            v = tr[r, cols[j]]
            if np.uint64(v) >= np.uint64(sizes[j]):  # undo the rows counted so far
                for r2 in range(r + 1):
                    for j2 in range(cols.shape[0] if r2 < r else j):
                        hist[offsets[j2] + tr[r2, cols[j2]]] -= 1
                return False
            hist[offsets[j] + v] += 1
    return True


@njit(nogil=True, cache=True)
def _drop_varying(tr, rows, ccol, cfirst, nconst, start):
    """Drop from the constant set the columns whose value changes in rows ``0..rows-1``.

    ``ccol[:nconst]`` are the columns still constant, ``cfirst[:nconst]`` their
    value.  A column that first differs at row ``r`` is swapped behind the new end
    of the set, with ``start[k] = r`` at its new position ``k``.  Returns the new
    ``nconst``: positions ``nconst_new .. nconst-1`` hold the columns dropped here.
    """
    n = nconst
    for r in range(rows):
        if n == 0:
            break
        diff = np.int64(0)
        for k in range(n):  # one branch-free pass per row: any column off its value?
            diff |= tr[r, ccol[k]] ^ cfirst[k]
        if diff == 0:
            continue
        k = 0
        while k < n:
            if tr[r, ccol[k]] != cfirst[k]:
                n -= 1
                c, f = ccol[k], cfirst[k]
                ccol[k], cfirst[k] = ccol[n], cfirst[n]
                ccol[n], cfirst[n] = c, f
                start[n] = r
            else:
                k += 1
    return n


#: Rows and entries per tile of :func:`_gather_varying` (a blocked transpose).
GATHER_TILE = 32
#: Values around its first one that a varying sparse entry counts in a small table.
WINDOW = 64
#: At most this many small-table counters per tally (8 bytes each).
WINDOW_TOTAL = 1 << 20


@njit(nogil=True, cache=True)
def _gather_varying(tr, rows, vcol, nold, nvar, start, pend, fill, lo, hi, small):
    """Count or append column ``vcol[k]`` of rows ``start[k]..rows-1``, ``k < nvar``.

    Columns ``k < nold`` take every row (``start`` is not read for them).  A value
    ``v`` with ``lo[k] <= v < hi[k]`` is counted in ``small[k, v - lo[k]]``; the
    others are appended to ``pend[k, fill[k]:]``, ``fill`` advanced by them (all
    values are, with one comparison less, when the window is empty).  The
    rows are read by tiles of ``GATHER_TILE`` rows and entries, so that neither
    side is walked with a stride through more lines than the cache holds.
    """
    t = GATHER_TILE
    for r0 in range(0, rows, t):
        r1 = min(rows, r0 + t)
        for k0 in range(0, nold, t):
            for k in range(k0, min(nold, k0 + t)):
                c, f = vcol[k], fill[k]
                if lo[k] < hi[k]:
                    fill[k] = _count_or_append(tr, r0, r1, c, k, f, lo[k], hi[k], pend, small)
                else:  # no window: a plain copy, `fill` advanced below
                    for r in range(r0, r1):
                        pend[k, f + r] = tr[r, c]
    for k in range(nold):
        if lo[k] >= hi[k]:
            fill[k] += rows
    for k in range(nold, nvar):  # entries that began to vary in this batch
        c, f = vcol[k], fill[k]
        if lo[k] < hi[k]:
            fill[k] = _count_or_append(tr, start[k], rows, c, k, f, lo[k], hi[k], pend, small)
        else:
            f -= start[k]
            for r in range(start[k], rows):
                pend[k, f + r] = tr[r, c]
            fill[k] = f + rows


@njit(nogil=True, cache=True, inline="always")
def _count_or_append(tr, r0, r1, c, k, f, a, b, pend, small):
    """Rows ``r0..r1-1`` of column ``c``: values in ``a..b-1`` counted, others appended at ``f``.

    Returns the new fill of ``pend[k]``.
    """
    for r in range(r0, r1):
        v = tr[r, c]
        if a <= v and v < b:
            small[k, v - a] += 1
        else:
            pend[k, f] = v
            f += 1
    return f


@njit(nogil=True, cache=True)
def _small_runs(small, lo, slots, value, count, offs):
    """The nonzero counters ``small[k]`` of ``k`` in ``slots`` as ``(value, count)``; zeroes them.

    Row ``slots[j]``'s go to ``offs[j]:offs[j + 1]`` (value ``lo[k] + d`` for
    counter ``d``, increasing); returns how many.
    """
    offs[0] = 0
    j = 0
    for s in range(slots.shape[0]):
        k = slots[s]
        for d in range(small.shape[1]):
            if small[k, d]:
                value[j], count[j] = lo[k] + d, small[k, d]
                small[k, d] = 0
                j += 1
        offs[s + 1] = j
    return j


@njit(nogil=True, cache=True)
def _run_end(pend, k, i, n):
    """First index ``e > i`` with ``pend[k, e] != pend[k, i]`` in the sorted ``pend[k, :n]``, or n.

    Gallops (steps 1, 2, 4, ...) then bisects, so a long run costs its logarithm.
    """
    x = pend[k, i]
    lo, hi, step = i, i + 1, 1
    while hi < n and pend[k, hi] == x:  # pend[k, lo] == x throughout
        lo = hi
        step *= 2
        hi = lo + step
    hi = min(hi, n)
    while hi - lo > 1:  # the first index in (lo, hi] off x: pend[k, hi] != x or hi == n
        mid = (lo + hi) // 2
        if pend[k, mid] == x:
            lo = mid
        else:
            hi = mid
    return hi


@njit(nogil=True, cache=True)
def _sorted_runs(pend, fill, slots, value, count, offs):
    """Runs of equal values in the sorted rows ``pend[k, :fill[k]]``, ``k`` in ``slots``.

    Writes ``(value, count)`` of every run, row by row in the order of ``slots``
    (room for ``fill[slots].sum()``), with row ``slots[j]``'s runs at
    ``offs[j]:offs[j + 1]``; returns how many.
    """
    offs[0] = 0
    j = 0
    for s in range(slots.shape[0]):
        k = slots[s]
        n = fill[k]
        i = np.int64(0)  # not the literal 0: one compiled _run_end
        while i < n:
            e = _run_end(pend, k, i, n)
            value[j] = pend[k, i]
            count[j] = e - i
            j += 1
            i = e
        offs[s + 1] = j
    return j


@njit(nogil=True, cache=True)
def _merge_two(va, ca, a0, a1, vb, cb, b0, b1, vo, co, o):
    """Merge the sorted distinct ``va[a0:a1]`` and ``vb[b0:b1]`` into ``vo[o:]``, adding counts.

    Values in both take the sum of their counts ``ca``, ``cb``; returns the end in ``vo``.
    """
    i, j = a0, b0
    while i < a1 and j < b1:
        x, y = va[i], vb[j]
        if x < y:
            vo[o], co[o] = x, ca[i]
            i += 1
        elif y < x:
            vo[o], co[o] = y, cb[j]
            j += 1
        else:
            vo[o], co[o] = x, ca[i] + cb[j]
            i += 1
            j += 1
        o += 1
    for r in range(i, a1):
        vo[o], co[o] = va[r], ca[r]
        o += 1
    for r in range(j, b1):
        vo[o], co[o] = vb[r], cb[r]
        o += 1
    return o


@njit(nogil=True, cache=True)
def _merge_parts(va, ca, sa, vb, cb, sb, vc, cc, sc, out_entry, out_value, out_count, out_starts):
    """Merge three parts sorted by entry, then value, with distinct pairs, adding equal pairs.

    A part is ``(values, counts, starts)``: its entry ``e`` spans
    ``starts[e]:starts[e + 1]`` of ``values``, ``counts``.  Writes the merged
    values and counts (room for the parts' total) with their entry bounds to
    ``out_starts``, and the entry of each to ``out_entry`` unless it is empty;
    returns how many.  Per entry, two parts' segments are merged into the output,
    three by way of a scratch row (the entry's first two, merged).
    """
    n_entries = out_starts.shape[0] - 1
    entries = out_entry.shape[0] > 0
    longest = 0
    for e in range(n_entries):
        longest = max(longest, sa[e + 1] - sa[e] + sb[e + 1] - sb[e])
    tv = np.empty(longest, dtype=np.int64)  # scratch values and counts
    tc = np.empty(longest, dtype=np.int64)
    # an int64 zero, not the literal 0: every call of _merge_two then has the
    # same argument types, and numba compiles it once
    nil = np.int64(0)
    o = nil
    out_starts[0] = 0
    for e in range(n_entries):
        a0, a1, b0, b1, c0, c1 = sa[e], sa[e + 1], sb[e], sb[e + 1], sc[e], sc[e + 1]
        o0 = o
        if a0 == a1 and b0 == b1:
            o = _merge_two(vc, cc, c0, c1, vc, cc, c1, c1, out_value, out_count, o)
        elif c0 == c1:
            o = _merge_two(va, ca, a0, a1, vb, cb, b0, b1, out_value, out_count, o)
        elif b0 == b1:
            o = _merge_two(va, ca, a0, a1, vc, cc, c0, c1, out_value, out_count, o)
        elif a0 == a1:
            o = _merge_two(vb, cb, b0, b1, vc, cc, c0, c1, out_value, out_count, o)
        else:
            t = _merge_two(va, ca, a0, a1, vb, cb, b0, b1, tv, tc, nil)
            o = _merge_two(tv, tc, nil, t, vc, cc, c0, c1, out_value, out_count, o)
        out_starts[e + 1] = o
        if entries:
            for i in range(o0, o):
                out_entry[i] = e
    return o


@njit(nogil=True, cache=True)
def _runs_of_keys(key, order, count):
    """Runs of equal ``key[order[i]]``: the first ``order`` index of each, and the summed counts."""
    n = order.shape[0]
    first = np.empty(n, dtype=np.int64)
    total = np.empty(n, dtype=np.int64)
    j = -1
    prev = np.int64(0)
    for i in range(n):
        o = order[i]
        if i == 0 or key[o] != prev:
            j += 1
            first[j] = o
            total[j] = 0
            prev = key[o]
        total[j] += count[o]
    return first[: j + 1], total[: j + 1]


def merge_triples(entry: np.ndarray, value: np.ndarray, count: np.ndarray):
    """Sort ``(entry, value, count)`` triples by entry, then value, adding equal pairs' counts.

    The result of :meth:`EntryCounts._merge` on an empty counter.  Entries must be
    non-negative; when ``entry * span + (value - min)`` fits in 63 bits (``span`` the
    value range) pairs are packed into one int64 key for a single stable sort (fast
    on a few sorted runs: :class:`EntryTally` keeps its parts sorted), otherwise
    ``np.lexsort`` orders them.
    """
    entry = np.asarray(entry, dtype=np.int64)
    value = np.asarray(value, dtype=np.int64)
    count = np.asarray(count, dtype=np.int64)
    if entry.size == 0:
        return entry, value, count
    lo, hi = int(value.min()), int(value.max())
    span = hi - lo + 1
    if (int(entry.max()) + 1) * span < 1 << 63:
        key = entry * np.int64(span) + (value - np.int64(lo))
        order = np.argsort(key, kind="stable")
    else:
        order = np.lexsort((value, entry))
        key = np.empty(order.size, dtype=np.int64)  # the rank of each distinct pair
        e, v = entry[order], value[order]
        new = np.ones(order.size, dtype=np.int64)
        new[1:] = (e[1:] != e[:-1]) | (v[1:] != v[:-1])
        key[order] = np.cumsum(new)
    pick, total = _runs_of_keys(key, order, count)
    return entry[pick], value[pick], total


def merge_sorted_parts(parts: list[tuple], n_entries: int):
    """Merge parts ``(values, counts, starts)`` into sorted ``(entry, value, count)`` triples.

    Each part is sorted by entry, then value, with distinct pairs; entry ``e``
    spans ``starts[e]:starts[e + 1]``.  Equal pairs' counts are added, as
    :func:`merge_triples` does.  Three parts are merged in one linear pass (the
    smallest three first while there are more), so nothing is sorted again.
    """
    empty = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(n_entries + 1, np.int64))
    parts = sorted(parts, key=lambda part: part[0].size)
    while True:
        group, parts = parts[:3], parts[3:]
        last = not parts
        group += [empty] * (3 - len(group))
        bound = sum(part[0].size for part in group)
        entry = np.empty(bound if last else 0, dtype=np.int64)
        value = np.empty(bound, dtype=np.int64)
        count = np.empty(bound, dtype=np.int64)
        starts = np.empty(n_entries + 1, dtype=np.int64)
        n = _merge_parts(*group[0], *group[1], *group[2], entry, value, count, starts)
        if last:
            if n <= bound // 2:  # many pairs added up: do not keep the room
                return entry[:n].copy(), value[:n].copy(), count[:n].copy()
            return entry[:n], value[:n], count[:n]
        merged = (value[:n], count[:n], starts)
        sizes = [part[0].size for part in parts]
        parts.insert(int(np.searchsorted(sizes, n)), merged)


class EntryTally:
    """:class:`EntryCounts` for the engine's own transcripts, one per worker thread.

    Entries with at most :data:`DENSE_VALUES` possible values (``ranges``, from
    :func:`entry_ranges`) are counted in a dense table by a jitted loop that
    releases the GIL; a batch with a value outside its range counts those entries
    by sorting instead.  Every other (sparse) entry keeps its first value while it
    stays constant, which costs one comparison per row; once it varies, the rows so
    far become one ``(entry, value, count)`` triple.  Its later values within
    :data:`WINDOW` of its first one are counted in a small table (at most
    :data:`WINDOW_TOTAL` counters; an entry whose values mostly miss it stops
    looking), the others gathered into a pending buffer (at most ``pending_bytes``,
    or one batch), sorted one entry at a time when full.  Each flush keeps its runs
    sorted by entry and value, so :meth:`result` merges them in linear passes.  It
    gives the same counts as :meth:`EntryCounts.add` on every batch.
    """

    def __init__(self, ranges: np.ndarray, pending_bytes: int = 1 << 25):
        ranges = np.asarray(ranges, dtype=np.int64)
        self.n_entries = ranges.size
        dense = (ranges > 0) & (ranges <= DENSE_VALUES)
        cols = np.flatnonzero(dense)
        keep = np.cumsum(ranges[cols]) <= DENSE_TOTAL
        self.cols = cols[keep].astype(np.int64)
        self.sizes = ranges[self.cols]
        self.offsets = np.concatenate([[0], np.cumsum(self.sizes)[:-1]]).astype(np.int64)
        self.hist = np.zeros(int(self.sizes.sum()), dtype=np.int64)
        sparse = np.ones(self.n_entries, dtype=bool)
        sparse[self.cols] = False
        self.sparse_cols = np.flatnonzero(sparse).astype(np.int64)
        self.n = 0
        self.parts: list[tuple] = []  # (entry, value, count) triples, merged in result()
        self.runs: list[tuple] = []  # (values, counts, starts) of each flush, sorted by entry
        self.pending_bytes = int(pending_bytes)
        n_sparse = self.sparse_cols.size
        self.sparse_rows = 0  # rows seen by the sparse entries
        # constant so far: entries ccol[:nconst], each with its value cfirst[k]
        self.ccol = self.sparse_cols.copy()
        self.cfirst = np.zeros(n_sparse, dtype=np.int64)
        self.nconst = n_sparse
        self.start = np.zeros(n_sparse, dtype=np.int64)
        # varying: entries vcol[:nvar]; values of recent rows in pend[k, :fill[k]]
        self.vcol = np.zeros(n_sparse, dtype=np.int64)
        self.vstart = np.zeros(n_sparse, dtype=np.int64)
        self.nvar = 0
        self.fill = np.zeros(n_sparse, dtype=np.int64)
        self.pend = np.zeros((0, 0), dtype=np.int64)
        # varying entry k counts values lo[k] <= v < hi[k] in small[k], the others go to pend
        window = min(WINDOW, WINDOW_TOTAL // max(n_sparse, 1))
        self.lo = np.zeros(n_sparse, dtype=np.int64)
        self.hi = np.zeros(n_sparse, dtype=np.int64)
        self.small = np.zeros((n_sparse, window), dtype=np.int64)
        self.open_windows = 0  # slots with hi > lo, among the varying ones
        self.pending_rows = 0  # rows gathered since the last flush (the largest fill)

    def add(self, tr: np.ndarray, rows: int) -> None:
        """Count rows ``0..rows-1`` of C-contiguous int64 transcripts ``tr``."""
        self.n += rows
        if rows == 0:
            return
        if not _count_dense(tr, rows, self.cols, self.sizes, self.offsets, self.hist):
            self._keep(value_runs(tr[:rows], self.cols))
        if self.sparse_cols.size:
            self._add_sparse(tr, rows)

    def _add_sparse(self, tr: np.ndarray, rows: int) -> None:
        if self.sparse_rows == 0:
            self.cfirst[:] = tr[0, self.ccol]
        before, nold = self.nconst, self.nvar
        after = _drop_varying(tr, rows, self.ccol, self.cfirst, before, self.start)
        nvar = nold + before - after
        if nvar:
            self._reserve(nvar, rows)
        if after < before:  # entries that began to vary here: their constant rows so far
            new = slice(after, before)
            self.parts.append(
                (self.ccol[new].copy(), self.cfirst[new].copy(), self.sparse_rows + self.start[new])
            )
            self.vcol[nold:nvar] = self.ccol[new]
            self.vstart[nold:nvar] = self.start[new]
            self._windows(nold, nvar, self.cfirst[new])
            self.nconst, self.nvar = after, nvar
        if nvar:
            _gather_varying(
                tr, rows, self.vcol, nold, nvar, self.vstart, self.pend, self.fill,
                self.lo, self.hi, self.small,
            )  # fmt: skip
            self.pending_rows += rows
            self._close_windows(nvar)
        self.sparse_rows += rows

    def _windows(self, k0: int, k1: int, first: np.ndarray) -> None:
        """Small-table windows of slots ``k0..k1-1``: the values around ``first`` (no overflow)."""
        half, bottom, top = self.small.shape[1] // 2, np.iinfo(np.int64).min, np.iinfo(np.int64).max
        lo = np.where(first < bottom + half, bottom, first - half)  # wraps only where not taken
        self.lo[k0:k1] = lo
        self.hi[k0:k1] = np.where(lo > top - self.small.shape[1], top, lo + self.small.shape[1])
        self.open_windows += int((self.hi[k0:k1] > lo).sum())

    def _close_windows(self, nvar: int) -> None:
        """Empty the windows of entries whose values mostly miss them (one comparison less)."""
        if self.open_windows == 0:
            return
        lo, hi, fill = self.lo[:nvar], self.hi[:nvar], self.fill[:nvar]
        miss = (hi > lo) & (fill >= self.small.shape[1]) & (fill > self.small[:nvar].sum(axis=1))
        hi[miss] = lo[miss]  # `lo` still gives the values of the counts already in `small`
        self.open_windows -= int(miss.sum())

    def _reserve(self, nvar: int, rows: int) -> None:
        """Room in ``pend`` for ``nvar`` entries and ``rows`` more rows, flushing if needed."""
        slots, width = self.pend.shape
        if nvar <= slots and self.pending_rows + rows <= width:
            return
        self._flush()
        if nvar > slots or rows > width:
            slots = max(slots, min(self.sparse_cols.size, max(nvar, 2 * slots, 16)))
            width = max(rows, self.pending_bytes // (8 * slots))
            self.pend = np.empty((slots, width), dtype=np.int64)

    def _keep(self, triples) -> None:
        if triples is not None:
            self.parts.append(triples)

    def _flush(self) -> None:
        """Sort the pending values of each varying entry into triples."""
        if self.pending_rows == 0:
            return
        nvar, fill, pend = self.nvar, self.fill, self.pend
        full = fill[:nvar] == self.pending_rows
        bulk = nvar if full.all() else int(np.argmin(full))
        pend[:bulk, : self.pending_rows].sort(axis=1)  # rows sorted in place, one call
        for k in range(bulk, nvar):  # rows shorter: new entries, values counted in `small`
            if fill[k] > 1:
                pend[k, : fill[k]].sort()
        by_entry = np.argsort(self.vcol[:nvar])  # runs sorted by entry, then value
        entries = self.vcol[by_entry]
        offs = np.empty(nvar + 1, dtype=np.int64)
        bound = int(fill[:nvar].sum())
        value = np.empty(bound, dtype=np.int64)  # pages past the runs are never touched
        count = np.empty(bound, dtype=np.int64)
        total = _sorted_runs(pend, fill, by_entry, value, count, offs)
        self._keep_runs(entries, offs, value, count, total, bound)
        bound = int(nvar * self.small.shape[1])
        value = np.empty(bound, dtype=np.int64)
        count = np.empty(bound, dtype=np.int64)
        total = _small_runs(self.small, self.lo, by_entry, value, count, offs)
        self._keep_runs(entries, offs, value, count, total, bound)
        fill[:nvar] = 0
        self.vcol[:nvar] = entries  # all empty now: later gathers read columns in order
        self.lo[:nvar], self.hi[:nvar] = self.lo[by_entry], self.hi[by_entry]
        self.pending_rows = 0

    def _keep_runs(self, entries, offs, value, count, total: int, bound: int) -> None:
        """Keep ``total`` runs, those of ``entries[j]`` at ``offs[j]:offs[j + 1]``, as a part."""
        if total == 0:
            return
        if total <= bound // 2:  # few runs: do not keep the room
            value, count = value[:total].copy(), count[:total].copy()
        starts = np.zeros(self.n_entries + 1, dtype=np.int64)
        starts[entries + 1] = np.diff(offs)
        np.cumsum(starts, out=starts)
        self.runs.append((value, count, starts))

    def _constant_parts(self) -> list[tuple]:
        """The entries still constant, as triples sorted by entry (the tally is not changed)."""
        k = self.nconst
        if self.sparse_rows == 0 or k == 0:
            return []
        by_entry = np.argsort(self.ccol[:k])
        rows = np.full(k, self.sparse_rows, dtype=np.int64)
        return [(self.ccol[by_entry], self.cfirst[by_entry], rows)]

    def merge(self, other: EntryTally) -> None:
        """Add another tally of the same entries into this one."""
        other._flush()
        self.hist += other.hist
        self.n += other.n
        self.parts += other.parts + other._constant_parts()
        self.runs += other.runs

    def result(self) -> EntryCounts:
        """The counts as an :class:`EntryCounts`."""
        self._flush()
        out = EntryCounts(self.n_entries)
        out.n = self.n
        parts = self.parts + self._constant_parts()
        nz = np.flatnonzero(self.hist)
        if nz.size:
            j = np.searchsorted(self.offsets, nz, side="right") - 1
            parts.append((self.cols[j], nz - self.offsets[j], self.hist[nz]))
        merged = None
        if parts:
            merged = merge_triples(*(np.concatenate([p[k] for p in parts]) for k in range(3)))
        if not self.runs:
            if merged is not None:
                out.entry, out.value, out.count = merged
            return out
        runs = list(self.runs)
        if merged is not None:
            starts = np.zeros(self.n_entries + 1, dtype=np.int64)
            np.cumsum(np.bincount(merged[0], minlength=self.n_entries), out=starts[1:])
            runs.append((merged[1], merged[2], starts))
        out.entry, out.value, out.count = merge_sorted_parts(runs, self.n_entries)
        return out


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
