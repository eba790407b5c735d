"""The engine's per-thread tally of transcript entry values (jitted, GIL released).

See :class:`EntryTally`; its counts equal :meth:`EntryCounts.add
<sketchsim.sketch.entry_counts.EntryCounts.add>` on every batch.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from sketchsim.sketch.entry_counts import CountMerge, EntryCounts, merge_triples, value_runs

__all__ = ["EntryTally", "DENSE_VALUES", "DENSE_TOTAL"]

#: Entries with at most this many possible values are counted in a dense table.
DENSE_VALUES = 1 << 12
#: At most this many dense counters per tally (8 bytes each).
DENSE_TOTAL = 1 << 22
#: Counters per cache line.
_LINE = 8


def _padded(sizes: np.ndarray) -> np.ndarray:
    """Counters each dense entry takes in the table: its range, in an odd number of lines.

    A row's increments walk the entries in order; with blocks of 2^k lines (ranges
    like 256) they would all fall in the same few cache sets and evict each other.
    An odd line stride spreads consecutive entries over every set.
    """
    lines = -(-np.asarray(sizes, dtype=np.int64) // _LINE)
    return _LINE * (lines + (lines % 2 == 0))


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
        padded = _padded(ranges[cols])
        keep = np.cumsum(padded) <= DENSE_TOTAL
        self.cols = cols[keep].astype(np.int64)
        self.sizes = ranges[self.cols]
        room = padded[keep]
        self.offsets = np.concatenate([[0], np.cumsum(room)[:-1]]).astype(np.int64)
        self.hist = np.zeros(int(room.sum()), dtype=np.int64)
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
        merge = CountMerge(self.n_entries, pending=1 << 62)  # one pass at the end
        for run in self.runs:
            merge.add_run(*run)
        if merged is not None:
            merge.add_triples(*merged)
        out.entry, out.value, out.count = merge.triples()
        return out
