"""EntryTally's sparse path (constant-so-far entries, pending values) and its kernels.

Each jitted kernel is compared, jitted and as plain Python (``py_func``, what
NUMBA_DISABLE_JIT=1 runs), with an obvious reference written here; the tally as
a whole with ``Counter`` per column (tests/naive.py) and ``EntryCounts.add``.
"""

from collections import Counter

import naive
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nojit import run_without_jit

from sketchsim.sketch.entry_counts import (
    EntryCounts,
    _merge_parts,
    _merge_two,
    _runs_of_keys,
    merge_sorted_parts,
    merge_triples,
)
from sketchsim.sketch.entry_tally import (
    DENSE_VALUES,
    EntryTally,
    _drop_varying,
    _gather_varying,
    _padded,
    _run_end,
    _small_runs,
    _sorted_runs,
)

WIDE = 1 << 24  # a declared range counted sparsely


def both(kernel):
    return [kernel, getattr(kernel, "py_func", kernel)]  # no py_func under NUMBA_DISABLE_JIT


# ---- references ---------------------------------------------------------------------------


def ref_first_change(tr, rows, cols, first):
    """Per column, the first row ``< rows`` whose value differs from ``first``, or None."""
    out = []
    for c, f in zip(cols, first, strict=True):
        out.append(next((r for r in range(rows) if tr[r, c] != f), None))
    return out


def ref_triples(pairs_counts):
    """Sorted ``(entry, value, count)`` with equal pairs added, from an iterable of triples."""
    total = Counter()
    for e, v, c in pairs_counts:
        total[(int(e), int(v))] += int(c)
    return sorted((e, v, c) for (e, v), c in total.items())


def as_list(entry, value, count):
    return [(int(e), int(v), int(c)) for e, v, c in zip(entry, value, count, strict=True)]


def check_tally(got: EntryCounts, tr: np.ndarray) -> None:
    """``got`` equals Counter per column and EntryCounts.add on all rows ``tr``."""
    assert got.n == tr.shape[0]
    found = [{} for _ in range(got.n_entries)]
    for e, v, c in zip(got.entry, got.value, got.count, strict=True):
        assert int(v) not in found[e]
        found[e][int(v)] = int(c)
    assert found == naive.entry_value_counts(tr.reshape(-1, got.n_entries))
    ref = EntryCounts(got.n_entries)
    ref.add(tr.reshape(-1, got.n_entries))
    for a, b in [(got.entry, ref.entry), (got.value, ref.value), (got.count, ref.count)]:
        assert a.dtype == np.int64
        np.testing.assert_array_equal(a, b)


def run_tally(batches, ranges, threads=1, pending_bytes=1 << 25, padding=3):
    """Feed ``batches`` round-robin to ``threads`` tallies, merge them, return the result."""
    tallies = [EntryTally(ranges, pending_bytes=pending_bytes) for _ in range(threads)]
    for k, b in enumerate(batches):
        padded = np.full((b.shape[0] + padding, b.shape[1]), 10**9, dtype=np.int64)
        padded[: b.shape[0]] = b  # rows past `rows` are never read
        tallies[k % threads].add(padded, b.shape[0])
    for t in tallies[1:]:
        tallies[0].merge(t)
    return tallies[0].result()


# ---- kernels ------------------------------------------------------------------------------


@pytest.mark.parametrize("kernel", both(_drop_varying))
@pytest.mark.parametrize("seed", range(12))
def test_drop_varying_matches_reference(kernel, seed):
    rng = np.random.default_rng(seed)
    rows = int(rng.integers(0, 9))
    width = int(rng.choice([1, 2, 7, 63, 64, 65]))
    tr = np.zeros((rows + 2, width), dtype=np.int64)
    base = rng.integers(-3, 3, width)
    tr[:] = base
    for c in range(width):  # a column changes at some row, or never
        r = int(rng.integers(0, rows + 2))
        if r < rows + 2:
            tr[r:, c] = rng.integers(-(1 << 62), 1 << 62, rows + 2 - r)
    nconst = int(rng.integers(0, width + 1))
    cols = rng.permutation(width)[:nconst].astype(np.int64)
    first = base[cols].copy()
    if nconst and seed % 3 == 0:
        first[0] ^= 1  # a first value already off at row 0
    expect = ref_first_change(tr, rows, cols, first)
    ccol, cfirst = cols.copy(), first.copy()
    start = np.full(nconst, -7, dtype=np.int64)
    after = kernel(tr, rows, ccol, cfirst, nconst, start)
    still = {(int(c), int(f)) for c, f, e in zip(cols, first, expect, strict=True) if e is None}
    dropped = {
        (int(c), int(f), e) for c, f, e in zip(cols, first, expect, strict=True) if e is not None
    }
    assert set(zip(ccol[:after].tolist(), cfirst[:after].tolist(), strict=True)) == still
    got = zip(ccol[after:].tolist(), cfirst[after:].tolist(), start[after:].tolist(), strict=True)
    assert set(got) == dropped
    assert after == len(still)


@pytest.mark.parametrize("kernel", both(_drop_varying))
def test_drop_varying_edges(kernel):
    tr = np.array([[5, 5, 5]], dtype=np.int64)  # one row
    ccol, cfirst, start = np.arange(3), np.array([5, 4, 5]), np.zeros(3, dtype=np.int64)
    assert kernel(tr, 1, ccol, cfirst, 3, start) == 2
    assert ccol[2] == 1 and cfirst[2] == 4 and start[2] == 0
    assert kernel(tr, 0, ccol, cfirst, 2, start) == 2  # zero rows: nothing changes
    # values whose XOR is zero only when equal, at the int64 extremes
    tr = np.array([[-(1 << 63), (1 << 63) - 1], [-(1 << 63), -(1 << 63)]], dtype=np.int64)
    ccol, cfirst = np.arange(2), tr[0].copy()
    assert kernel(tr, 2, ccol, cfirst, 2, start) == 1
    assert ccol[0] == 0 and ccol[1] == 1 and start[1] == 1


@pytest.mark.parametrize("kernel", both(_gather_varying))
@pytest.mark.parametrize("seed", range(16))
def test_gather_varying_matches_reference(kernel, seed):
    rng = np.random.default_rng(seed)
    rows, width = int(rng.integers(0, 80)), int(rng.integers(1, 70))  # tiles of 32 and ragged
    if seed % 2:
        tr = rng.integers(-(1 << 62), 1 << 62, (rows + 1, width))
    else:  # small values, some inside the windows
        tr = rng.integers(-6, 6, (rows + 1, width))
    tr[0, 0] = -(1 << 63)  # the int64 extremes: no window arithmetic overflows
    tr[-1, -1] = (1 << 63) - 1
    nvar = int(rng.integers(0, width + 1))
    nold = int(rng.integers(0, nvar + 1))
    vcol = rng.permutation(width)[:nvar].astype(np.int64)
    start = np.where(np.arange(nvar) < nold, 99, rng.integers(0, rows + 1, nvar))  # 99: unread
    fill = rng.integers(0, 5, nvar)
    lo = rng.integers(-8, 3, nvar)
    hi = lo + rng.choice([0, 0, 1, 4, 8], nvar)  # empty windows: a plain copy
    lo[: nvar // 4] = -(1 << 63)  # windows at the int64 extremes
    hi[: nvar // 4] = -(1 << 63) + 3
    small = rng.integers(0, 3, (nvar + 1, 8))
    pend = np.full((nvar + 1, rows + 6), -1, dtype=np.int64)
    for k in range(nvar):
        pend[k, : fill[k]] = rng.integers(0, 9, fill[k])
    expect = [list(pend[k, : fill[k]]) for k in range(nvar)]
    counted = small.copy()
    for k in range(nvar):
        for r in range(0 if k < nold else start[k], rows):
            v = int(tr[r, vcol[k]])
            if lo[k] <= v < hi[k]:
                counted[k, v - lo[k]] += 1
            else:
                expect[k].append(v)
    fill2 = fill.copy()
    kernel(tr, rows, vcol, nold, nvar, start.astype(np.int64), pend, fill2, lo, hi, small)
    for k in range(nvar):
        assert fill2[k] == len(expect[k])
        assert list(pend[k, : fill2[k]]) == expect[k]
        assert (pend[k, fill2[k] :] == -1).all()
    assert (pend[nvar] == -1).all()
    np.testing.assert_array_equal(small, counted)


@pytest.mark.parametrize("kernel", both(_small_runs))
@pytest.mark.parametrize("seed", range(6))
def test_small_runs_matches_reference(kernel, seed):
    rng = np.random.default_rng(seed)
    slots_n, width = int(rng.integers(0, 7)), int(rng.choice([1, 3, 64]))
    small = rng.integers(0, 3, (slots_n + 1, width)) * (rng.random((slots_n + 1, width)) < 0.4)
    lo = rng.integers(-(1 << 62), 1 << 62, slots_n + 1)
    lo[-1] = (1 << 63) - width  # the last window ends at the largest int64
    slots = rng.permutation(slots_n + 1)[: max(slots_n, 1)].astype(np.int64)
    before = small.copy()
    value = np.full(small.size + 1, -7, dtype=np.int64)
    count = np.full(small.size + 1, -7, dtype=np.int64)
    offs = np.full(slots.size + 1, -1, dtype=np.int64)
    total = kernel(small, lo, slots, value, count, offs)
    expect = []
    for j, k in enumerate(slots):
        row = [(int(lo[k]) + d, int(c)) for d, c in enumerate(before[k]) if c]
        assert offs[j + 1] - offs[j] == len(row)
        expect += row
        assert (small[k] == 0).all()  # emptied
    others = np.setdiff1d(np.arange(slots_n + 1), slots)
    np.testing.assert_array_equal(small[others], before[others])
    assert total == len(expect) == offs[-1] and offs[0] == 0
    assert list(zip(value[:total].tolist(), count[:total].tolist(), strict=True)) == expect
    assert (value[total:] == -7).all()


def test_small_values_are_counted_in_windows():
    """Values near an entry's first value are counted, not gathered; far ones close its window."""
    rng = np.random.default_rng(8)
    tr = rng.integers(0, 3, (200, 6))
    tr[:, 4] = rng.integers(0, 1 << 40, 200)  # misses its window: the window closes
    tr[:, 5] = 7
    tr[150:, 5] = [10**12, -(10**12)] * 25  # begins to vary late, far from its window
    tally = EntryTally(np.full(6, WIDE, dtype=np.int64))
    for lo in range(0, 200, 50):
        tally.add(np.ascontiguousarray(tr[lo : lo + 50]), 50)
    slot = {int(c): k for k, c in enumerate(tally.vcol[: tally.nvar])}
    assert all(tally.fill[slot[c]] == 0 for c in range(4))  # all counted in `small`
    assert tally.hi[slot[4]] == tally.lo[slot[4]]  # closed
    assert tally.open_windows == int((tally.hi[: tally.nvar] > tally.lo[: tally.nvar]).sum()) == 5
    assert tally.fill[slot[4]] == tally.pending_rows - 1  # row 0 is its constant start
    assert tally.fill[slot[5]] == 50 and tally.small[slot[5]].sum() == 0
    check_tally(tally.result(), tr)


@pytest.mark.parametrize("kernel", both(_run_end))
def test_run_end_matches_reference(kernel):
    rng = np.random.default_rng(7)
    for length in (1, 2, 3, 7, 64, 65, 200):
        for spread in (1, 2, 5, 1000):
            row = np.sort(rng.integers(0, spread, length))
            pend = np.vstack([np.full(length + 3, 99), np.append(row, [-5, -5, -5])])
            for i in range(length):
                expect = next((e for e in range(i + 1, length) if row[e] != row[i]), length)
                assert kernel(pend, 1, i, length) == expect


@pytest.mark.parametrize("kernel", both(_sorted_runs))
@pytest.mark.parametrize("seed", range(8))
def test_sorted_runs_matches_reference(kernel, seed):
    rng = np.random.default_rng(seed)
    nvar = int(rng.integers(0, 6))
    pend = np.full((nvar + 1, 40), 123, dtype=np.int64)
    fill = rng.integers(0, 41, nvar + 1)
    fill[:1] = 1 if seed % 2 else 0  # one value, or none
    for k in range(nvar):
        top = 3 + 10 * k if seed % 3 else 1 << 62  # runs, or (nearly) all distinct
        pend[k, : fill[k]] = np.sort(rng.integers(-2, top, fill[k]))
    slots = rng.permutation(nvar).astype(np.int64)
    offs = np.full(nvar + 1, -1, dtype=np.int64)
    bound = int(fill[slots].sum())
    value = np.full(bound + 2, -7, dtype=np.int64)
    count = np.full(bound + 2, -7, dtype=np.int64)
    total = kernel(pend, fill, slots, value, count, offs)
    expect = []
    for j, k in enumerate(slots):
        runs = sorted(Counter(pend[k, : fill[k]].tolist()).items())
        assert offs[j + 1] - offs[j] == len(runs)
        expect += runs
    assert offs[0] == 0 and total == len(expect) == offs[-1]
    assert list(zip(value[:total].tolist(), count[:total].tolist(), strict=True)) == expect
    assert (value[total:] == -7).all() and (count[total:] == -7).all()


def random_part(rng, n_entries, size, wide):
    """A part ``(values, counts, starts)``: sorted distinct pairs on a random subset of entries."""
    top = 1 << 62 if wide else 4
    pairs = {(int(rng.integers(0, n_entries)), int(rng.integers(-top, top))) for _ in range(size)}
    pairs = sorted(pairs)
    entry = np.array([e for e, _ in pairs], dtype=np.int64)
    values = np.array([v for _, v in pairs], dtype=np.int64)
    counts = rng.integers(1, 1 << 40, len(pairs))
    starts = np.searchsorted(entry, np.arange(n_entries + 1)).astype(np.int64)
    return entry, (values, counts, starts)


@pytest.mark.parametrize("kernel", both(_merge_two))
@pytest.mark.parametrize("seed", range(6))
def test_merge_two_matches_reference(kernel, seed):
    rng = np.random.default_rng(seed)
    a = np.unique(rng.integers(-5, 5, int(rng.integers(0, 9))))
    b = np.unique(rng.integers(-5, 5, int(rng.integers(0, 9))))
    ca, cb = rng.integers(1, 9, a.size), rng.integers(1, 9, b.size)
    a0, a1 = sorted(rng.integers(0, a.size + 1, 2))
    b0, b1 = sorted(rng.integers(0, b.size + 1, 2))
    vo = np.full(20, 77, dtype=np.int64)
    co = np.full(20, 77, dtype=np.int64)
    end = kernel(a, ca, a0, a1, b, cb, b0, b1, vo, co, 3)
    expect = Counter()
    for v, c in zip(np.append(a[a0:a1], b[b0:b1]), np.append(ca[a0:a1], cb[b0:b1]), strict=True):
        expect[int(v)] += int(c)
    assert end == 3 + len(expect)
    assert list(zip(vo[3:end].tolist(), co[3:end].tolist(), strict=True)) == sorted(expect.items())
    assert (vo[:3] == 77).all() and (vo[end:] == 77).all()


@pytest.mark.parametrize("kernel", both(_merge_parts))
@pytest.mark.parametrize("seed", range(12))
def test_merge_parts_matches_reference(kernel, seed):
    rng = np.random.default_rng(seed)
    n_entries = int(rng.choice([1, 2, 5, 65]))
    made = [random_part(rng, n_entries, int(rng.integers(0, 60)), seed % 2) for _ in range(3)]
    if seed % 4 == 0:  # one part empty
        made[seed % 3] = random_part(rng, n_entries, 0, False)
    bound = sum(p[0].size for _, p in made)
    out = [np.full(bound + 2, -9, dtype=np.int64) for _ in range(3)]
    out_starts = np.full(n_entries + 1, -9, dtype=np.int64)
    entries = out[0] if seed % 3 else out[0][:0]  # entries written, or not asked for
    n = kernel(*made[0][1], *made[1][1], *made[2][1], entries, out[1], out[2], out_starts)
    expect = ref_triples(
        (e, v, c)
        for entry, (values, counts, _) in made
        for e, v, c in zip(entry, values, counts, strict=True)
    )
    assert n == len(expect)
    pairs = list(zip(out[1][:n].tolist(), out[2][:n].tolist(), strict=True))
    assert pairs == [(v, c) for _, v, c in expect]
    got_entry = np.searchsorted(out_starts, np.arange(n), side="right") - 1
    assert got_entry.tolist() == [e for e, _, _ in expect]
    assert out_starts[0] == 0 and out_starts[-1] == n
    if seed % 3:
        assert out[0][:n].tolist() == [e for e, _, _ in expect]
    assert (out[1][n:] == -9).all()


@pytest.mark.parametrize("n_parts", [0, 1, 2, 3, 4, 7, 12])
def test_merge_sorted_parts_matches_merge_triples(n_parts):
    rng = np.random.default_rng(n_parts)
    n_entries = 9
    made = [
        random_part(rng, n_entries, int(rng.integers(0, 40)), n_parts % 2) for _ in range(n_parts)
    ]
    got = merge_sorted_parts([p for _, p in made], n_entries)
    triples = [np.zeros(0, np.int64)] * 3
    if made:
        triples = [
            np.concatenate([m[0] for m in made]),
            *(np.concatenate(x) for x in zip(*[m[1][:2] for m in made], strict=True)),
        ]
    for a, b in zip(got, merge_triples(*triples), strict=True):
        assert a.dtype == np.int64
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("kernel", both(_runs_of_keys))
def test_runs_of_keys_matches_reference(kernel):
    rng = np.random.default_rng(3)
    for size in (1, 2, 50):
        key = rng.integers(-3, 3, size)
        count = rng.integers(1, 9, size)
        order = np.argsort(key, kind="stable")
        first, total = kernel(key, order, count)
        sums = Counter()
        for k, c in zip(key.tolist(), count.tolist(), strict=True):
            sums[k] += c
        assert [int(key[f]) for f in first] == sorted(sums)
        assert total.tolist() == [sums[k] for k in sorted(sums)]
        position = np.argsort(order)  # each run's first index is its first in `order`
        assert (np.diff(position[first]) > 0).all()
        assert all((key[order[position[f] - 1]] != key[f]) for f in first if position[f])


@pytest.mark.parametrize("seed", range(10))
def test_merge_triples_matches_reference(seed):
    rng = np.random.default_rng(seed)
    size = int(rng.integers(0, 200))
    entry = rng.integers(0, 5 if seed < 5 else 3000, size)
    if seed % 2:  # a value span too wide to pack with the entry: the lexsort path
        value = rng.choice(np.array([-(1 << 63), -1, 0, 1, (1 << 63) - 1]), size)
    else:
        value = rng.integers(-4, 4, size)
    count = rng.integers(1, 1 << 40, size)
    got = merge_triples(entry, value, count)
    assert as_list(*got) == ref_triples(zip(entry, value, count, strict=True))
    ref = EntryCounts(1)
    ref._merge(entry.astype(np.int64), value.astype(np.int64), count.astype(np.int64))
    for a, b in zip(got, (ref.entry, ref.value, ref.count), strict=True):
        np.testing.assert_array_equal(a, b)


# ---- the tally ----------------------------------------------------------------------------


def test_zero_rows_and_no_batches():
    ranges = np.array([3, WIDE, WIDE], dtype=np.int64)
    assert as_list(*_counts(run_tally([], ranges))) == []
    got = run_tally([np.zeros((0, 3), dtype=np.int64)] * 3, ranges, threads=2)
    assert got.n == 0 and got.entry.size == 0
    check_tally(got, np.zeros((0, 3), dtype=np.int64))


def _counts(c):
    return c.entry, c.value, c.count


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_one_row_batches(threads):
    rng = np.random.default_rng(1)
    batches = [rng.integers(0, 3, (1, 5)) for _ in range(7)]
    batches[0][0, 4] = -5
    ranges = np.array([3, WIDE, 3, WIDE, WIDE], dtype=np.int64)
    check_tally(run_tally(batches, ranges, threads), np.concatenate(batches))
    check_tally(run_tally(batches[:1], ranges), batches[0])


def test_all_columns_constant():
    batches = [np.full((40, 70), 9, dtype=np.int64) for _ in range(4)]
    tally = EntryTally(np.full(70, WIDE, dtype=np.int64))
    for b in batches:
        tally.add(b, b.shape[0])
    assert tally.nvar == 0 and tally.pend.size == 0  # nothing gathered, nothing sorted
    got = tally.result()
    assert got.count.tolist() == [160] * 70
    check_tally(got, np.concatenate(batches))


@pytest.mark.parametrize("row", [0, 17, 39])
def test_column_that_varies_only_in_its_last_batch(row):
    batches = [np.full((40, 3), 4, dtype=np.int64) for _ in range(5)]
    batches[-1][row:, 1] = np.arange(40 - row)  # row 0 of the column keeps 4 when row > 0
    tally = EntryTally(np.full(3, WIDE, dtype=np.int64))
    for b in batches:
        tally.add(b, b.shape[0])
    assert tally.nvar == 1 and tally.vcol[0] == 1 and tally.pending_rows == 40
    check_tally(tally.result(), np.concatenate(batches))


def test_column_constant_within_each_batch_but_not_across():
    batches = [np.full((30, 4), k, dtype=np.int64) for k in (5, 5, 6, 5, 7)]
    for threads in (1, 2, 3):
        check_tally(
            run_tally(batches, np.full(4, WIDE, dtype=np.int64), threads), np.concatenate(batches)
        )


def test_merge_where_one_thread_saw_a_column_constant():
    ranges = np.array([WIDE, 5, WIDE, WIDE], dtype=np.int64)
    a = [np.tile(np.array([8, 1, 2, 3]), (25, 1)) for _ in range(3)]  # thread 0: constant
    b = [x.copy() for x in a]
    b[1][10:, 0] = 9  # thread 1: entry 0 varies
    b[2][:, 2] = np.arange(25)
    batches = [x for pair in zip(a, b, strict=True) for x in pair]
    check_tally(run_tally(batches, ranges, threads=2), np.concatenate(batches))
    check_tally(run_tally(batches[::-1], ranges, threads=2), np.concatenate(batches[::-1]))
    # merging leaves the merged tally's own counts intact
    t0, t1 = EntryTally(ranges), EntryTally(ranges)
    t0.add(a[0], 25)
    t1.add(b[1], 25)
    t0.merge(t1)
    check_tally(t0.result(), np.concatenate([a[0], b[1]]))
    check_tally(t1.result(), b[1])
    check_tally(t0.result(), np.concatenate([a[0], b[1]]))  # result() can be asked twice


def test_values_outside_a_declared_range():
    ranges = np.array([4, WIDE, 4, WIDE], dtype=np.int64)
    rng = np.random.default_rng(2)
    batches = [rng.integers(0, 4, (20, 4)) for _ in range(6)]
    batches[1][7, 0] = 4  # dense entry out of its range: the batch's dense entries by sorting
    batches[3][0, 2] = -1
    batches[4][:, 1] = 1 << 62  # sparse entries take anything
    batches[5][19, 3] = -(1 << 63)
    for threads in (1, 2):
        check_tally(run_tally(batches, ranges, threads), np.concatenate(batches))


def test_dense_blocks_take_an_odd_number_of_cache_lines():
    sizes = np.arange(1, 600, dtype=np.int64)
    room = _padded(sizes)
    assert (room >= sizes).all() and (room < sizes + 16).all()
    assert (room % 8 == 0).all() and ((room // 8) % 2 == 1).all()
    tally = EntryTally(np.array([256, 3, 256, 8, 9], dtype=np.int64))
    starts = tally.offsets * 8 // 64  # lines, from the table's start
    assert np.unique(starts % 64).size == starts.size  # different cache sets
    assert (np.diff(tally.offsets) >= tally.sizes[:-1]).all()
    assert tally.hist.size == tally.offsets[-1] + _padded(tally.sizes[-1:])[0]


def test_entries_beyond_the_dense_budget_are_sparse():
    ranges = np.full(3, DENSE_VALUES, dtype=np.int64)
    ranges = np.concatenate([ranges, np.full(1030, DENSE_VALUES)])  # over DENSE_TOTAL in all
    tally = EntryTally(ranges)
    assert 0 < tally.sparse_cols.size < ranges.size
    rng = np.random.default_rng(4)
    batches = [rng.integers(0, 3, (5, ranges.size)) for _ in range(2)]
    for b in batches:
        tally.add(b, 5)
    check_tally(tally.result(), np.concatenate(batches))


@pytest.mark.parametrize("pending_bytes", [8, 8 * 40, 8 * 16 * 64])
def test_pending_memory_bound(pending_bytes):
    rng = np.random.default_rng(5)
    width, rows = 40, 50
    batches = [rng.integers(0, 6, (rows, width)) for _ in range(5)]
    for b in batches:
        b[:, : width // 2] = 3  # half constant
    batches[2][25:, 0] = 4  # one begins to vary later
    tally = EntryTally(np.full(width, WIDE, dtype=np.int64), pending_bytes=pending_bytes)
    for b in batches:
        tally.add(b, rows)
        slots, cap = tally.pend.shape
        assert tally.pend.nbytes <= max(pending_bytes, 8 * slots * rows)
        assert tally.pending_rows <= cap
    check_tally(tally.result(), np.concatenate(batches))


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(0, 40), min_size=0, max_size=8),
    st.lists(st.sampled_from(["const", "late", "batch", "small", "wide", "dense"]), min_size=1),
    st.integers(1, 3),
    st.sampled_from([8, 8 * 40, 1 << 25]),
    st.integers(0, 2**32 - 1),
)
def test_tally_matches_counter_on_structured_columns(sizes, kinds, threads, pending, seed):
    """Columns constant, varying late, constant per batch, random; dense and sparse."""
    rng = np.random.default_rng(seed)
    total = sum(sizes)
    tr = np.zeros((total, len(kinds)), dtype=np.int64)
    ranges = np.full(len(kinds), WIDE, dtype=np.int64)
    bounds = np.cumsum([0, *sizes])
    for c, kind in enumerate(kinds):
        if kind == "const":
            tr[:, c] = rng.integers(-(1 << 62), 1 << 62)
        elif kind == "late" and total:
            tr[:, c] = 11
            tr[int(rng.integers(0, total)) :, c] = rng.integers(0, 3)
        elif kind == "batch":
            for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
                tr[lo:hi, c] = rng.integers(0, 2)
        elif kind == "small":
            tr[:, c] = rng.integers(0, 3, total)
        elif kind == "wide":
            tr[:, c] = rng.integers(-(1 << 63), (1 << 63) - 1, total, endpoint=True)
        else:
            ranges[c] = 3
            tr[:, c] = rng.integers(0, 3 if seed % 4 else 4, total)  # sometimes out of range
    batches = [tr[lo:hi] for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)]
    check_tally(run_tally(batches, ranges, threads, pending), tr)


def test_tally_without_jit_matches_entry_counts():
    """The whole tally as plain Python (NUMBA_DISABLE_JIT=1): flushes, merges, three-way merges."""
    code = """
import numpy as np
from sketchsim.sketch.entry_counts import EntryCounts
from sketchsim.sketch.entry_tally import EntryTally
rng = np.random.default_rng(9)
tr = rng.integers(0, 5, (60, 9))
tr[:, 0] = 4
tr[30:, 1] = rng.integers(-(1 << 62), 1 << 62, 30)
tr[:, 2] = rng.integers(0, 1 << 40, 60)
ranges = np.array([8, 1 << 24, 1 << 24, 3, 1 << 24, 5, 1 << 24, 1 << 24, 1 << 24])
tallies = [EntryTally(ranges, pending_bytes=8 * 16 * 7) for _ in range(2)]
for k, lo in enumerate(range(0, 60, 7)):
    block = np.ascontiguousarray(tr[lo : lo + 7])
    tallies[k % 2].add(block, block.shape[0])
tallies[0].merge(tallies[1])
got = tallies[0].result()
ref = EntryCounts(9)
ref.add(tr)
print(len(tallies[0].runs) > 3, got.n == 60)
for a, b in [(got.entry, ref.entry), (got.value, ref.value), (got.count, ref.count)]:
    print(a.dtype == np.int64 and np.array_equal(a, b))
"""
    assert run_without_jit(code)[:4] == ["True True", "True", "True", "True"]
