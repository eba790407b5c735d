import math

import naive
import numpy as np
import pytest

from sketchsim.certify.bounds import code_bound
from sketchsim.certify.certificate import certified_rank
from sketchsim.certify.chains import best_chain_product
from sketchsim.certify.codes import greedy_code, hadamard_code, random_code
from sketchsim.certify.streamed import (
    gap_histogram,
    greedy_gap_code,
    histogram_bound,
    random_streamed_bound,
    random_streamed_code,
    random_weight_words,
    streamed_bound,
    streamed_code_bound,
)
from sketchsim.errors import SketchsimError


def loop_histogram(code):
    """Pure-Python count of |c' minus c| over ordered pairs (independent of both versions)."""
    code = [list(map(int, row)) for row in code]
    m = len(code[0]) if code else 0
    hist = [0] * (m + 1)
    for i, a in enumerate(code):
        for j, b in enumerate(code):
            if i != j:
                hist[sum(1 for x, y in zip(a, b, strict=True) if y and not x)] += 1
    return hist


def random_rows(rng, n, m, p=0.5):
    return (rng.random((n, m)) < p).astype(np.uint8)


EDGE_CODES = {
    "m1 both": np.array([[0], [1]], np.uint8),
    "m1 one": np.array([[1]], np.uint8),
    "m1 zeros": np.zeros((3, 1), np.uint8),
    "m63 zero and one": np.array([[0] * 63, [1] * 63], np.uint8),
    "m64 zero and one": np.array([[0] * 64, [1] * 64], np.uint8),
    "m64 all ones x3": np.ones((3, 64), np.uint8),
    "m64 all zeros x2": np.zeros((2, 64), np.uint8),
    "m64 one word": np.ones((1, 64), np.uint8),
    "m65 mixed": np.vstack([np.zeros(65), np.ones(65), np.eye(65)[:3]]).astype(np.uint8),
    "m130 two": np.vstack([np.ones(130), np.r_[np.ones(64), np.zeros(66)]]).astype(np.uint8),
}


@pytest.mark.parametrize("name", sorted(EDGE_CODES))
def test_gap_histogram_edges(name):
    code = EDGE_CODES[name]
    want = naive.gap_histogram(code)
    assert want.tolist() == loop_histogram(code)
    got = gap_histogram(code)
    assert got.dtype == np.int64 and got.tolist() == want.tolist()
    assert got.sum() == len(code) * (len(code) - 1)


@pytest.mark.parametrize("m", [1, 2, 7, 63, 64, 65, 128])
def test_gap_histogram_random_codes(m):
    rng = np.random.default_rng(m)
    for n in (1, 2, 3, 40):
        code = random_rows(rng, n, m)  # mixed weights: the general kernel
        np.testing.assert_array_equal(gap_histogram(code), naive.gap_histogram(code))
        for w in {0, m // 2, m}:  # constant weight: the one-word kernel when m <= 64
            cw = np.zeros((n, m), np.uint8)
            for row in cw:
                row[rng.permutation(m)[:w]] = 1
            np.testing.assert_array_equal(gap_histogram(cw), naive.gap_histogram(cw))


def test_gap_histogram_matches_pure_python():
    code = random_rows(np.random.default_rng(1), 12, 9, p=0.3)
    assert gap_histogram(code).tolist() == loop_histogram(code)


@pytest.mark.parametrize("m,w,min_gap", [(12, 6, 2), (20, 10, 3), (64, 32, 10), (64, 20, 5)])
def test_greedy_gap_code_reproduces_random_code(m, w, min_gap):
    words = random_weight_words(m, w, 3000, seed=4)
    kept, hist = greedy_gap_code(words, min_gap, limit=300)
    want = random_code(m, w, 2 * min_gap, limit=300, draws=3000, seed=4)
    np.testing.assert_array_equal(words[kept], want)
    np.testing.assert_array_equal(hist, naive.gap_histogram(want))


def greedy_cases(m, rng):
    """Codes for the greedy kernels at width ``m``: random mixed weights (the general kernel),
    random constant weight (the one-word kernel when m <= 64), all zeros, all ones."""
    cw = np.zeros((60, m), np.uint8)
    for row in cw:
        row[rng.permutation(m)[: max(1, m // 3)]] = 1
    return {
        "mixed": random_rows(rng, 60, m, p=0.4),
        "constant weight": cw,
        "zeros": np.zeros((5, m), np.uint8),
        "ones": np.ones((5, m), np.uint8),
    }


@pytest.mark.parametrize("m", [1, 63, 64, 65, 128])
def test_greedy_gap_code_matches_naive(m):
    rng = np.random.default_rng(m)
    for name, code in greedy_cases(m, rng).items():
        for min_gap in sorted({0, 1, max(1, m // 8), m}):
            for limit in (1, 7, 1000):
                kept, hist = greedy_gap_code(code, min_gap, limit)
                want_kept, want_hist = naive.greedy_gap_code(code, min_gap, limit)
                assert kept.tolist() == want_kept.tolist(), (name, min_gap, limit)
                assert hist.tolist() == want_hist.tolist(), (name, min_gap, limit)


def test_greedy_gap_code_mixed_weights_keeps_gaps():
    rng = np.random.default_rng(2)
    code = random_rows(rng, 200, 70)  # mixed weights, two words per row: the general kernel
    kept, hist = greedy_gap_code(code, 15, limit=50)
    assert 5 <= len(kept) < 200
    sub = code[kept].astype(int)
    gaps = (1 - sub) @ sub.T
    assert gaps[~np.eye(len(sub), dtype=bool)].min() >= 15
    np.testing.assert_array_equal(hist, naive.gap_histogram(code[kept]))
    # greedy: every rejected word before the last kept one is too close to an earlier kept one
    kept_set = set(kept.tolist())
    for j in range(kept[-1]):
        if j not in kept_set:
            before = code[[i for i in kept if i < j]].astype(int)
            g = np.minimum((1 - before) @ code[j], (1 - code[j].astype(int)) @ before.T)
            assert g.min() < 15


SMALL_CODES = {
    "hadamard 12": lambda: hadamard_code(12, complements=True),
    "hadamard 24": lambda: hadamard_code(24, complements=True),
    "greedy 16/8/8": lambda: greedy_code(16, 8, 8, limit=40),
    "greedy 20/8/10": lambda: greedy_code(20, 8, 10, limit=40),
    "random 32/16/8": lambda: random_code(32, 16, 8, limit=300),
    "random 64/32/20": lambda: random_code(64, 32, 20, limit=500),
    "two words m4": lambda: np.array([[1, 1, 0, 0], [0, 0, 1, 1]], np.uint8),
    "one word": lambda: np.array([[1, 0, 1]], np.uint8),
}


@pytest.mark.parametrize("name", sorted(SMALL_CODES))
def test_streamed_bound_equals_code_bound_when_every_word_is_kept(name):
    code = SMALL_CODES[name]()
    value, pairs, rank = code_bound(code)
    assert pairs == len(code)  # code_bound keeps every word on these codes
    got = streamed_bound(code)
    assert got.words == len(code)
    assert got.value == pytest.approx(value, rel=1e-12)
    assert got.certified_rank == rank


def test_streamed_rounding_matches_certified_rank_at_an_integer():
    # two disjoint weight-2 words: gap 2 both ways, P = 1, value exactly 1, strict: r >= 2
    got = streamed_bound(SMALL_CODES["two words m4"]())
    assert got.value == 1.0 and got.certified_rank == 2
    P = np.array([[0.0, 1.0], [1.0, 0.0]])
    assert certified_rank(P, strict=True) == 2 and certified_rank(P, strict=False) == 1
    hist = np.array([0, 0, 2, 0, 0])
    assert histogram_bound(hist, 2, eps=0.49).certified_rank == math.ceil(
        4 / (2 + 2 * best_chain_product(2, 0.49) ** 2) - 1e-9
    )


@pytest.mark.parametrize("eps", [0.1, 0.25, 0.4])
def test_histogram_bound_below_the_limit_matches_certified_rank(eps):
    code = random_code(32, 16, 10, limit=120, seed=1)
    got = streamed_bound(code, eps=eps)
    g = (1 - code.astype(int)) @ code.T.astype(int)
    P = np.vectorize(lambda x: best_chain_product(int(x), eps))(g.T)
    np.fill_diagonal(P, 0.0)
    assert got.value == pytest.approx(n2 := len(code) ** 2 / (len(code) + (P**2).sum()))
    assert got.certified_rank == certified_rank(P, strict=False) == math.ceil(n2 - 1e-9)


def test_histogram_bound_rejects_unbounded_gaps_and_bad_counts():
    with pytest.raises(SketchsimError, match="unbounded"):
        streamed_bound(np.array([[1, 1, 0], [1, 0, 1]], np.uint8))  # gap 1: P = inf
    with pytest.raises(SketchsimError, match="unbounded"):
        streamed_bound(np.array([[1, 0], [1, 0]], np.uint8))  # duplicates: gap 0
    with pytest.raises(SketchsimError, match="pairs"):
        histogram_bound(np.array([0, 0, 3]), 2)


def test_random_streamed_bound_matches_dense_on_a_small_code():
    got = random_streamed_bound(40, 20, 4, limit=400, draws=2000, seed=3)
    code = random_code(40, 20, 8, limit=400, draws=2000, seed=3)
    value, pairs, rank = code_bound(code)
    assert got.words == len(code) == pairs
    assert got.value == pytest.approx(value, rel=1e-12) and got.certified_rank == rank


def test_streamed_bound_is_not_code_bound_when_pairs_are_dropped():
    # greedy(12, 4, 6) mixes gap-2 entries (P = 1) with small ones: code_bound drops pairs,
    # the streamed bound keeps all words, so it is a valid but smaller bound
    code = greedy_code(12, 4, 6, limit=40)
    value, pairs, _ = code_bound(code)
    got = streamed_bound(code)
    assert pairs < len(code) and got.words == len(code) and got.value < value


def test_random_streamed_code_is_random_code():
    want = random_code(40, 20, 4, limit=3000, seed=5)
    got = random_streamed_code(40, 20, 2, limit=3000, seed=5)
    np.testing.assert_array_equal(got, want)
    assert streamed_code_bound(got)[1:] == (3000, streamed_bound(got).certified_rank)


def test_best_bound_uses_the_streamed_code_past_max_words(monkeypatch):
    import sketchsim.certify.bounds as bounds

    monkeypatch.setattr(bounds, "STREAMED_WORDS", 6000)  # small, still past MAX_WORDS
    names = [name for name, _ in bounds.candidate_codes(bounds.STREAMED_MIN_M - 2)]
    assert not any("streamed" in n for n in names)
    row = bounds.best_bound(48)
    assert row.code == "random(w=24, d=4, seed=0, streamed)"
    assert row.codewords == row.pairs == 6000
    code = random_streamed_code(48, 24, 2, limit=6000)
    assert row.certified_rank == streamed_bound(code).certified_rank > 416  # dense best: 416
