"""Per-entry value counts of transcripts: the sparse counter and its linear merges.

THEORY section 5: a protocol correct on inputs drawn from the family has
H(T) >= H(answers) = bound.  By subadditivity, H(T) <= sum_e H(T_e) (the
"entry entropy"), and H(T_e) <= log2 |values T_e takes| (summed: "used bits").
So entry entropy < bound proves that the protocol cannot be correct on the
distribution, and entry entropy, unlike the joint entropy, is estimable from
a sample: each entry takes few values even when transcripts never repeat.
:class:`EntryCounts` holds the counts, :class:`CountMerge` adds sorted parts.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = [
    "value_runs",
    "EntryCounts",
    "entry_ranges",
    "merge_triples",
    "merge_sorted_parts",
    "CountMerge",
]


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


class CountMerge:
    """Sums parts of sorted, distinct ``(entry, value, count)`` triples in linear passes.

    The one count merge: the cluster's client adds each map task's counts here,
    and :meth:`EntryTally.result <sketchsim.sketch.entry_tally.EntryTally.result>`
    its flushed runs.  Parts are kept as ``(values, counts, starts)`` runs; once
    more than ``pending`` triples wait, they are merged into one
    (:func:`merge_sorted_parts`, three runs per linear pass, nothing re-sorted).
    """

    def __init__(self, n_entries: int, pending: int = 1 << 22):
        self.n_entries = int(n_entries)
        self.n = 0
        self.pending = int(pending)
        self.runs: list[tuple] = []
        self.waiting = 0

    def add_run(self, values: np.ndarray, counts: np.ndarray, starts: np.ndarray) -> None:
        """Add a run: entry ``e`` spans ``starts[e]:starts[e + 1]`` of ``values``/``counts``."""
        self.runs.append((values, counts, starts))
        self.waiting += values.size
        if len(self.runs) > 1 and self.waiting > self.pending:
            self.runs = [self._run_of(*merge_sorted_parts(self.runs, self.n_entries))]
            self.waiting = self.runs[0][0].size

    def add_triples(self, entry, value, count, inputs: int = 0) -> None:
        """Add sorted, distinct triples (and ``inputs`` to the number counted)."""
        self.n += int(inputs)
        entry = np.asarray(entry, dtype=np.int64)
        value = np.asarray(value, dtype=np.int64)
        self.add_run(value, np.asarray(count, dtype=np.int64), self._starts(entry))

    def _starts(self, entry: np.ndarray) -> np.ndarray:
        starts = np.zeros(self.n_entries + 1, dtype=np.int64)
        np.cumsum(np.bincount(entry, minlength=self.n_entries), out=starts[1:])
        return starts

    def _run_of(self, entry, value, count) -> tuple:
        return value, count, self._starts(entry)

    def triples(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every count merged: sorted ``(entry, value, count)``."""
        if not self.runs:
            empty = np.zeros(0, dtype=np.int64)
            return empty, empty.copy(), empty.copy()
        return merge_sorted_parts(self.runs, self.n_entries)

    def counts(self) -> EntryCounts:
        """The merged counts as an :class:`EntryCounts` of ``n`` inputs."""
        out = EntryCounts(self.n_entries)
        out.n = self.n
        out.entry, out.value, out.count = self.triples()
        return out
