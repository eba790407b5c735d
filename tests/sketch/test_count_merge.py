"""The one count merge and the one grouping (#29): against plain NumPy references."""

import numpy as np
import pytest

from sketchsim.sketch.entry_counts import CountMerge, EntryCounts
from sketchsim.sketch.grouping import group_transcripts, sort_groups


def _reference_counts(parts, n_entries):
    """Add up (entry, value) -> count with a dict: obviously right."""
    total = {}
    for entry, value, count in parts:
        for e, v, c in zip(entry.tolist(), value.tolist(), count.tolist(), strict=True):
            total[e, v] = total.get((e, v), 0) + c
    keys = sorted(total)
    return (
        np.array([k[0] for k in keys], dtype=np.int64),
        np.array([k[1] for k in keys], dtype=np.int64),
        np.array([total[k] for k in keys], dtype=np.int64),
    )


def _sorted_part(rng, n_entries, n):
    tr = rng.integers(-3, 4, size=(n, n_entries))
    counts = EntryCounts(n_entries)
    counts.add(tr)
    return counts.entry, counts.value, counts.count


@pytest.mark.parametrize("pending", [1, 5, 1 << 22])
@pytest.mark.parametrize("n_parts", [0, 1, 2, 3, 7])
def test_count_merge_equals_a_dict_of_counts(pending, n_parts):
    rng = np.random.default_rng(n_parts * 10 + pending % 7)
    n_entries = 6
    parts = [_sorted_part(rng, n_entries, int(rng.integers(1, 30))) for _ in range(n_parts)]
    merge = CountMerge(n_entries, pending=pending)
    for entry, value, count in parts:
        merge.add_triples(entry, value, count, inputs=int(count[entry == 0].sum()))
    got = merge.triples()
    want = _reference_counts(parts, n_entries)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)
    assert merge.counts().n == sum(int(p[2][p[0] == 0].sum()) for p in parts)
    if pending == 1 and n_parts > 1:
        assert len(merge.runs) == 1  # compacted as it went, in linear merges


def _reference_groups(fp):
    """Group ids as ranks of distinct (h1, h2) rows, by Python sorting."""
    rows = [tuple(r) for r in fp.tolist()]
    rank = {r: k for k, r in enumerate(sorted(set(rows)))}
    return np.array([rank[r] for r in rows], dtype=np.int64)


@pytest.mark.parametrize("case", ["random", "ties", "second-word-only", "empty", "one"])
def test_grouping_equals_sorting_the_pairs(case):
    rng = np.random.default_rng(3)
    fp = rng.integers(0, 5, size=(200, 2)).astype(np.uint64)
    if case == "ties":
        fp[:, 1] = fp[:, 0]
    elif case == "second-word-only":  # equal first words, different second: the lexsort path
        fp[:, 0] = 7
    elif case == "empty":
        fp = fp[:0]
    elif case == "one":
        fp = fp[:1]
    inverse, counts = group_transcripts(fp)
    want = _reference_groups(fp)
    np.testing.assert_array_equal(inverse, want)
    np.testing.assert_array_equal(counts, np.bincount(want) if want.size else want)
    if fp.shape[0]:
        order, new = sort_groups(fp[:, 0], fp[:, 1])
        assert int(new.sum()) == len(set(map(tuple, fp.tolist())))
        presorted = fp[np.lexsort((fp[:, 1], fp[:, 0]))]
        order2, new2 = sort_groups(presorted[:, 0], presorted[:, 1], presorted=True)
        assert int(new2.sum()) == int(new.sum())
