import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sketchsim.sketch.grouping import entropy_bits, find_collision_candidates, group_transcripts


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 300), st.integers(1, 20), st.integers(0, 2**32 - 1))
def test_grouping_matches_numpy_unique(B, values, seed):
    fp = np.random.default_rng(seed).integers(0, values, (B, 2)).astype(np.uint64)
    inverse, counts = group_transcripts(fp)
    if B == 0:
        assert inverse.size == 0 and counts.size == 0
        return
    _, inv_ref, counts_ref = np.unique(fp, axis=0, return_inverse=True, return_counts=True)
    np.testing.assert_array_equal(inverse, inv_ref.reshape(-1))
    np.testing.assert_array_equal(counts, counts_ref)


def test_entropy_reference_values():
    assert entropy_bits([5]) == 0.0
    assert entropy_bits([1, 1, 1, 1]) == 2.0
    assert math.isclose(entropy_bits([1, 3]), -(0.25 * math.log2(0.25) + 0.75 * math.log2(0.75)))


def test_collision_candidates():
    inverse = np.array([0, 1, 0, 1, 0])
    answers = np.array([[1], [2], [1], [2], [3]])
    assert find_collision_candidates(inverse, answers) == [(0, 4)]
    assert find_collision_candidates(inverse, np.array([[1], [2], [1], [2], [1]])) == []


def test_collision_candidates_match_numpy_on_a_large_input():
    # find_collision_candidates is one jitted pass (grouping._collision_pairs) over all B
    # inputs, as transcript.py calls it; B is above any batch size (family.chunk_size() is at
    # most 16,384, run_all's progress steps at most 2^17), so nothing may be lost between them
    rng = np.random.default_rng(1)
    B = (1 << 18) + 1000
    inverse = rng.integers(0, B // 3, B)
    answers = rng.integers(0, 2, (B, 3))
    first = np.full(inverse.max() + 1, B)
    np.minimum.at(first, inverse, np.arange(B))
    rep = first[inverse]
    differ = np.flatnonzero((answers != answers[rep]).any(axis=1))
    expected = [(int(rep[j]), int(j)) for j in differ[:8]]
    assert find_collision_candidates(inverse, answers) == expected
    late = np.zeros((B, 2), dtype=np.int64)
    late[-1] = 1  # the only difference is in the very last input
    assert find_collision_candidates(np.zeros(B, dtype=np.int64), late) == [(0, B - 1)]


def test_the_entropy_does_not_depend_on_how_the_groups_are_split_or_ordered():
    """One formula, exactly rounded (issue #46): any split of the groups, in any order,
    merged as a size histogram, gives the same float as the whole."""
    from collections import Counter

    from sketchsim.sketch.grouping import entropy_from_size_histogram

    rng = np.random.default_rng(3)
    counts = rng.integers(1, 50, size=5000)
    whole = entropy_bits(counts)
    want = -sum((c / counts.sum()) * math.log2(c / counts.sum()) for c in counts.tolist())
    assert whole == pytest.approx(want, rel=1e-12)
    for parts in (2, 7, 31):
        hist = Counter()
        for chunk in np.array_split(rng.permutation(counts), parts):
            hist.update(Counter(chunk.tolist()))
        assert entropy_from_size_histogram(list(hist), list(hist.values())) == whole
    assert entropy_bits(rng.permutation(counts)) == whole
