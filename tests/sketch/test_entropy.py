"""Entry entropy and used bits (sampled-mode measures of THEORY section 5)."""

import math
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numba import njit

from sketchsim.sketch import HardFamily, Layer, Plan, Protocol
from sketchsim.sketch.entry_counts import EntryCounts
from sketchsim.sketch.estimators import entry_bits
from sketchsim.sketch.measure import measure
from sketchsim.sketch.packed_tokens import count_ones
from sketchsim.sketch.plugins import resolve_spec


def naive_entry_counts(tr):
    """Per entry, a Counter of its values (the obvious way)."""
    return [Counter(tr[:, e].tolist()) for e in range(tr.shape[1])]


def naive_entry_entropy(tr):
    total = 0.0
    for c in naive_entry_counts(tr):
        n = sum(c.values())
        total -= sum(k / n * math.log2(k / n) for k in c.values())
    return total


@settings(max_examples=25, deadline=None)
@given(
    st.integers(1, 60),
    st.integers(1, 9),
    st.integers(1, 5),
    st.integers(0, 2**32 - 1),
    st.sampled_from([1, 3, 64, 2**40]),
)
def test_entry_counts_match_naive(B, E, chunks, seed, spread):
    rng = np.random.default_rng(seed)
    tr = rng.integers(-spread, spread, size=(B, E), dtype=np.int64)
    acc = EntryCounts(E)
    for part in np.array_split(tr, chunks):
        acc.add(part)
    assert acc.n == B
    got = [Counter() for _ in range(E)]
    for e, v, c in zip(acc.entry, acc.value, acc.count, strict=True):
        got[e][int(v)] += int(c)
    assert got == naive_entry_counts(tr)
    exact = entry_bits(acc, exact=True)
    assert math.isclose(exact.entry_entropy, naive_entry_entropy(tr), abs_tol=1e-9)
    used = sum(math.log2(len(c)) for c in naive_entry_counts(tr))
    assert math.isclose(exact.used_bits, used, abs_tol=1e-9)


def test_miller_madow_and_interval():
    tr = np.array([[0, 5], [1, 5], [1, 5], [2, 5]])
    acc = EntryCounts(2)
    acc.add(tr)
    est = entry_bits(acc, exact=False)
    plugin = naive_entry_entropy(tr)  # 1.5 bits, the constant entry adds 0
    assert math.isclose(est.plugin_entropy, plugin)
    # Miller-Madow: (K - 1) / (2 n ln 2) per entry, K = 3 and 1
    assert math.isclose(est.entry_entropy, plugin + 2 / (2 * 4 * math.log(2)))
    assert est.ci_low < est.entry_entropy < est.ci_high
    # layer ranges: entries 1..1 is the constant entry
    assert entry_bits(acc, 1, 2).entry_entropy == 0.0
    assert entry_bits(acc, 1, 2).used_bits == 0.0


def test_layer_slices_add_up():
    rng = np.random.default_rng(3)
    tr = rng.integers(0, 4, size=(200, 6))
    acc = EntryCounts(6)
    acc.add(tr)
    parts = [entry_bits(acc, a, b, exact=True) for a, b in ((0, 2), (2, 5), (5, 6))]
    whole = entry_bits(acc, exact=True)
    assert math.isclose(sum(p.entry_entropy for p in parts), whole.entry_entropy)
    assert math.isclose(sum(p.used_bits for p in parts), whole.used_bits)


CORRECT_BUILTINS = (
    "raw",
    "block-counts",
    "kernel",
    "kernel:values=blocks",
    "kernel:r=3,bits=3",
    "multihead:heads=2",
)


@pytest.mark.slow
@pytest.mark.parametrize("q,s", [(2, 3), (3, 3), (3, 1), (2, 7)])
@pytest.mark.parametrize("spec", CORRECT_BUILTINS)
def test_entry_entropy_bounds_joint_entropy_bounds_answers(q, s, spec):
    fam = HardFamily(q, s, seed=q * s)
    proto, params, source = resolve_spec(spec)
    rep = measure(fam, fam.all_answers(), proto, params, source)
    assert rep.correct_fraction == 1.0
    assert not rep.capped
    tol = 1e-9
    assert rep.used_bits >= rep.entry_entropy_bits - tol
    assert rep.entry_entropy_bits >= rep.entropy_bits - tol
    assert rep.entropy_bits >= fam.bound_bits - tol
    assert rep.declared_bits >= fam.bound_bits - tol
    assert not rep.entry_entropy_below_bound
    # per layer, entries add up to the total
    assert math.isclose(sum(L["entry_entropy_bits"] for L in rep.layers), rep.entry_entropy_bits)


@njit
def _emit_twice(layer, pos, bits, ctx, state, aux, out):
    q, s = ctx[0], ctx[1]
    for i in range(q):
        c = count_ones(bits, i * s, (i + 1) * s)
        out[i] = c
        out[q + i] = c


@njit
def _update_twice(layer, pos, bits, ctx, state, sketch, aux):
    if pos < ctx[0]:
        state[0] = sketch[pos]


@njit
def _answer_twice(pos, bits, ctx, state, aux):
    return state[0]


TWICE = Protocol(
    "twice",
    "the data token sends every block count twice",
    lambda ctx, params: Plan(
        [Layer("concat", 2 * ctx.q, ctx.s + 1, speakers="last")],
        1,
        _emit_twice,
        _update_twice,
        _answer_twice,
    ),
)


@pytest.mark.slow
@pytest.mark.parametrize("q,s", [(3, 3), (4, 2)])
def test_answers_sent_twice_double_the_entry_entropy_only(q, s):
    fam = HardFamily(q, s)
    rep = measure(fam, fam.all_answers(), TWICE, {})
    assert rep.correct_fraction == 1.0
    assert math.isclose(rep.entry_entropy_bits, 2 * fam.bound_bits)
    assert math.isclose(rep.entropy_bits, fam.bound_bits)
    assert math.isclose(rep.used_bits, 2 * fam.bound_bits)


def test_clipped_counts_flagged_exhaustive_and_sampled():
    proto, params, _ = resolve_spec("clipped-counts")
    small = HardFamily(3, 3)
    rep = measure(small, small.all_answers(), proto, params)
    assert rep.entry_entropy_below_bound and rep.collision is not None
    big = HardFamily(16, 7)  # 2^48 inputs: sampled
    rep = measure(big, big.sample_answers(3000), proto, params)
    assert rep.capped
    # min(t, 6) for t uniform in 0..7: 2.75 bits per entry
    assert abs(rep.entry_entropy_bits - 16 * 2.75) < 0.5
    assert rep.entry_entropy_ci[1] < big.bound_bits
    assert rep.entry_entropy_below_bound


def test_sampled_estimate_covers_the_true_value():
    proto, params, _ = resolve_spec("block-counts")
    fam = HardFamily(12, 7, seed=5)
    rep = measure(fam, fam.sample_answers(4000), proto, params)
    # each entry is uniform on 8 values: exactly 3 bits each, 36 in all
    lo, hi = rep.entry_entropy_ci
    assert lo <= 36.0 <= hi
    assert rep.entry_entropy_plugin_bits < 36.0  # the plug-in is biased down
    assert rep.used_bits == pytest.approx(36.0)
    assert rep.distinct_transcripts == 4000 and rep.capped
