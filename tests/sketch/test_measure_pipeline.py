"""measure()'s batched, threaded pipeline against the straightforward computation.

The pipeline shares the family's fixed tokens instead of repeating them per
input, counts transcript entries in dense per-thread tables and checks answers
in jitted loops; none of that may change a single number.
"""

import naive
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sketchsim.sketch import HardFamily
from sketchsim.sketch.engine import Engine
from sketchsim.sketch.entry_counts import EntryCounts, entry_ranges
from sketchsim.sketch.entry_tally import EntryTally
from sketchsim.sketch.estimators import entry_bits, match_answers
from sketchsim.sketch.family_plugins import resolve_family
from sketchsim.sketch.grouping import entropy_bits
from sketchsim.sketch.measure import measure
from sketchsim.sketch.plugins import resolve_spec


def as_entry_counts(per_entry, n):
    acc = EntryCounts(len(per_entry))
    acc.n = n
    rows = sorted((e, v, c) for e, d in enumerate(per_entry) for v, c in d.items())
    acc.entry = np.array([r[0] for r in rows], dtype=np.int64)
    acc.value = np.array([r[1] for r in rows], dtype=np.int64)
    acc.count = np.array([r[2] for r in rows], dtype=np.int64)
    return acc


@pytest.mark.parametrize("q,s", [(1, 1), (3, 2), (4, 7), (5, 65), (9, 63), (2, 130), (40, 3)])
def test_variable_tokens_are_the_tokens_after_the_fixed_ones(q, s):
    fam = HardFamily(q, s, seed=5)
    T = fam.sample_answers(60)
    T[0] = 0
    T[1] = s
    full = fam.tokens(T)
    var = fam.variable_tokens(T)
    assert var.shape == (60, 1, fam.words)
    np.testing.assert_array_equal(var, full[:, q:])
    np.testing.assert_array_equal(fam.fixed_tokens(), full[0, :q])
    X = naive.pack_bits(naive.hard_data_token(T, fam.perm, fam.m))
    np.testing.assert_array_equal(var[:, 0], X)
    buffer = np.full((80, 1, fam.words), 7, dtype=np.uint64)  # stale contents are overwritten
    np.testing.assert_array_equal(fam.variable_tokens(T, out=buffer), var)


def test_large_family_builds_bit_by_bit():
    fam = HardFamily(1000, 300, seed=1)  # prefix-mask table too large: the bit loop
    assert fam._masks is None
    T = fam.sample_answers(3)
    np.testing.assert_array_equal(fam.variable_tokens(T), fam.tokens(T)[:, fam.q :])


@pytest.mark.parametrize(
    "spec", ["raw", "block-counts", "kernel:bits=3", "multihead:heads=3,bits=4"]
)
def test_engine_on_fixed_and_variable_tokens_matches_full_tokens(spec):
    fam = HardFamily(3, 4, seed=2)
    proto, params, _ = resolve_spec(spec)
    plan = proto.plan(fam.context(), params)
    T = fam.sample_answers(300)
    a = Engine(plan, fam.context(), "a").run(fam.tokens(T), store=True)
    b = Engine(plan, fam.context(), "b").run(
        fam.variable_tokens(T), store=True, fixed=fam.fixed_tokens()
    )
    for x, y in [(a.fingerprints, b.fingerprints), (a.answers, b.answers)]:
        np.testing.assert_array_equal(x, y)
    np.testing.assert_array_equal(a.transcripts, b.transcripts)
    py = Engine(plan, fam.context(), "p", python=True).run(
        fam.variable_tokens(T[:20]), store=True, fixed=fam.fixed_tokens()
    )
    np.testing.assert_array_equal(py.fingerprints, a.fingerprints[:20])


@settings(max_examples=40, deadline=None)
@given(
    st.integers(0, 70),
    st.integers(1, 12),
    st.lists(st.integers(1, 9000), min_size=1, max_size=12),
    st.integers(0, 2**32 - 1),
)
def test_entry_tally_matches_counter(rows, batches, ranges, seed):
    """Dense and sparse entries, out-of-range batches falling back, merged tallies."""
    rng = np.random.default_rng(seed)
    ranges = np.array(ranges, dtype=np.int64)
    tallies = [EntryTally(ranges), EntryTally(ranges, pending_bytes=8 * 40)]  # flushes often
    all_rows = []
    for k in range(batches):
        tr = rng.integers(0, ranges, (rows, ranges.size))
        if k == 1 and rows:
            tr[rows // 2, 0] = ranges[0]  # outside its declared range
        if k == 2 and rows:
            tr[-1, -1] = -1
        padded = np.zeros((rows + 3, ranges.size), dtype=np.int64)  # rows past `rows` ignored
        padded[:rows] = tr
        padded[rows:] = 10**9
        tallies[k % 2].add(padded, rows)
        all_rows.append(tr)
    tallies[0].merge(tallies[1])
    got = tallies[0].result()
    tr = np.concatenate(all_rows)
    assert got.n == tr.shape[0]
    found = [{} for _ in range(ranges.size)]
    for e, v, c in zip(got.entry, got.value, got.count, strict=True):
        found[e][int(v)] = int(c)
    assert found == naive.entry_value_counts(tr)
    ref = EntryCounts(ranges.size)
    ref.add(tr)
    for a, b in [(got.entry, ref.entry), (got.value, ref.value), (got.count, ref.count)]:
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("m", [1, 63, 64, 65, 128])
def test_entry_tally_edge_widths(m):
    ranges = np.full(m, 2, dtype=np.int64)
    for fill in (0, 1):
        tally = EntryTally(ranges)
        tr = np.full((5, m), fill, dtype=np.int64)
        tally.add(tr, 5)
        got = tally.result()
        assert list(got.value) == [fill] * m and list(got.count) == [5] * m


def test_entry_ranges_of_each_channel():
    fam = HardFamily(3, 4)
    for spec, expect in [
        ("block-counts", [5] * 3),  # concat, alphabet s + 1
        ("clipped-counts", None),
        ("kernel:bits=3", None),
    ]:
        proto, params, _ = resolve_spec(spec)
        eng = Engine(proto.plan(fam.context(), params), fam.context(), spec)
        ranges = entry_ranges(eng.layers, eng.speak)
        assert ranges.size == eng.total_len
        if expect is not None:
            assert ranges.tolist() == expect
        tr = eng.run(fam.tokens(fam.all_answers()), store=True).transcripts
        assert (tr >= 0).all() and (tr < ranges).all()  # every reachable value fits


def test_match_answers():
    T = np.array([[1, 2], [3, 4], [5, 6]], dtype=np.uint8)
    ans = np.array([[3, 4], [5, 0], [9, 9]], dtype=np.int64)
    correct = np.ones(3, dtype=bool)
    assert match_answers(ans, T, 1, 2, correct) == 1
    assert correct.tolist() == [True, True, False]
    assert match_answers(ans[:1], T, 1, 1, correct) == -1


def check_measure(fam, T, spec):
    proto, params, _ = resolve_spec(spec)
    rep = measure(fam, T, proto, params)
    eng = Engine(proto.plan(fam.context(), params), fam.context(), proto.name)
    _, group_counts, per_entry, correct, first = naive.transcript_measures(fam, eng, T)
    assert rep.distinct_transcripts == group_counts.size
    assert rep.entropy_bits == entropy_bits(group_counts)
    assert rep.correct_fraction == float(correct.mean())
    assert rep.wrong_inputs == int((~correct).sum())
    assert rep.first_failure == first
    exact = rep.capped is False
    total = entry_bits(as_entry_counts(per_entry, T.shape[0]), exact=exact)
    assert rep.used_bits == total.used_bits
    assert rep.entry_entropy_bits == total.entry_entropy
    assert rep.entry_entropy_ci == [total.ci_low, total.ci_high]
    return rep


@pytest.mark.parametrize(
    "spec", ["raw", "block-counts", "clipped-counts", "kernel:bits=3", "multihead:heads=3,bits=4"]
)
def test_measure_matches_the_straightforward_computation(spec):
    fam = HardFamily(4, 3, seed=1)
    check_measure(fam, fam.all_answers(), spec)  # exhaustive: 256 inputs
    check_measure(fam, fam.sample_answers(70_001), spec)  # several chunks and threads


def test_measure_on_a_family_without_fixed_tokens():
    ftype, params, _ = resolve_family("mqar")
    fam = ftype.make(3, 3, 0, params)
    assert fam.n_fixed == 0 and ftype.default_protocols
    for spec in ftype.default_protocols[:2]:
        check_measure(fam, fam.sample_answers(3000), spec)


def test_entry_bits_helpers_equal_scipy_bit_for_bit():
    from scipy.special import entr
    from scipy.stats import norm

    from sketchsim.sketch.estimators import NORMAL_QUANTILES, _entr, normal_quantile

    for c, z in NORMAL_QUANTILES.items():
        assert z == norm.ppf(0.5 + c / 2)
    assert normal_quantile(0.8) == norm.ppf(0.9)  # not in the table: SciPy
    p = np.random.default_rng(0).random(100_000)
    p = np.concatenate([p, 1 / np.arange(1, 5000), [1.0]])
    np.testing.assert_array_equal(_entr(p), entr(p))


def test_wrong_fixed_tokens_are_a_family_error():
    from sketchsim.errors import FamilyError

    class Broken(HardFamily):
        def fixed_tokens(self):
            return np.zeros((self.q, self.words + 1), dtype=np.uint64)

    fam = Broken(2, 2)
    proto, params, _ = resolve_spec("block-counts")
    with pytest.raises(FamilyError, match="fixed_tokens must be a uint64 array of shape"):
        measure(fam, fam.all_answers(), proto, params)


def test_progress_reaches_the_end_in_order():
    fam = HardFamily(3, 3)
    proto, params, _ = resolve_spec("block-counts")
    seen = []
    measure(fam, fam.sample_answers(30_000), proto, params, progress=lambda d, t: seen.append(d))
    assert seen == sorted(seen) and seen[-1] == 30_000 and len(seen) >= 2


def test_strided_variable_tokens_are_measured_as_their_values():
    """A family returning a strided view (here every other row of a wider array) is
    measured as the same tokens made contiguous: the engine reads rows by offset."""

    class Strided(HardFamily):
        def variable_tokens(self, T, out=None):
            tokens = super().variable_tokens(T)
            wide = np.zeros((2 * tokens.shape[0],) + tokens.shape[1:], dtype=np.uint64)
            wide[::2] = tokens
            wide[1::2] = ~np.uint64(0)  # garbage between the rows a view skips
            view = wide[::2]
            assert not view.flags.c_contiguous
            return view

    proto, params, _ = resolve_spec("block-counts")
    T = HardFamily(3, 3).sample_answers(2_000)
    want = measure(HardFamily(3, 3), T, proto, params).to_dict()
    got = measure(Strided(3, 3), T, proto, params).to_dict()
    want.pop("seconds"), got.pop("seconds")
    assert got == want and got["correct_fraction"] == 1.0
