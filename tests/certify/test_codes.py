import numpy as np
import pytest

from sketchsim.certify.codes import (
    code_stats,
    golay_code,
    golay_dodecads,
    golay_octads,
    greedy_code,
    hadamard_code,
    hadamard_orders,
    make_code,
)
from sketchsim.errors import SketchsimError


def min_distance(code):
    code = np.asarray(code, dtype=int)
    return min(int((a != b).sum()) for i, a in enumerate(code) for b in code[i + 1 :])


@pytest.mark.parametrize("order", [4, 8, 12, 20, 24, 28, 32])
def test_hadamard_rows(order):
    rows = hadamard_code(order)
    assert rows.shape == (order - 1, order)
    assert (rows.sum(1) == order // 2).all()
    inter = rows.astype(int) @ rows.T.astype(int)
    off = inter[~np.eye(order - 1, dtype=bool)]
    assert (off == order // 4).all()  # rows meet pairwise in n/4 ones


def test_hadamard_24_with_complements_is_46_words_distance_12():
    code = hadamard_code(24, complements=True)
    assert code_stats(code) == {"size": 46, "m": 24, "weights": [12], "min_distance": 12}
    assert min_distance(code) == 12


def test_hadamard_28_uses_gf27():
    # 27 = 3^3: the only order here that needs a field extension
    assert code_stats(hadamard_code(28))["min_distance"] == 14


def test_hadamard_bad_order():
    assert 16 not in hadamard_orders(40) and 24 in hadamard_orders(40)
    with pytest.raises(SketchsimError, match="order - 1 must be a prime power"):
        hadamard_code(16)


def test_golay_code_known_sizes():
    code = golay_code()
    weights = np.bincount(code.sum(1), minlength=25)
    assert weights[0] == 1 and weights[8] == 759 and weights[12] == 2576
    assert weights[16] == 759 and weights[24] == 1 and weights.sum() == 4096
    octads, dodecads = golay_octads(), golay_dodecads()
    assert octads.shape == (759, 24) and dodecads.shape == (2576, 24)
    assert code_stats(octads)["min_distance"] == 8
    assert code_stats(dodecads[:300])["min_distance"] >= 8
    # linear: the sum of two codewords is a codeword
    words = {w.tobytes() for w in code}
    assert ((code[5] ^ code[77]).tobytes()) in words


def naive_greedy(m, d, w):
    """Scan 0..2^m-1 in order, reading each number as a row, most significant bit first."""
    chosen = []
    for number in range(2**m):
        v = np.array([int(ch) for ch in format(number, f"0{m}b")], dtype=np.uint8)
        if v.sum() != w:
            continue
        if all(int((v != c).sum()) >= d for c in chosen):
            chosen.append(v)
    return np.array(chosen)


@pytest.mark.parametrize("m,d,w", [(6, 2, 2), (8, 4, 4), (10, 6, 5), (12, 4, 3), (1, 1, 1)])
def test_greedy_matches_naive_lexicode(m, d, w):
    np.testing.assert_array_equal(greedy_code(m, d, w), naive_greedy(m, d, w))


def test_greedy_24_8_8_is_the_759_octad_lexicode():
    code = greedy_code(24, 8, 8)
    assert len(code) == 759 and code_stats(code)["min_distance"] == 8


def test_greedy_edges_63_64():
    assert code_stats(greedy_code(63, 2, 1)) == {
        "size": 63,
        "m": 63,
        "weights": [1],
        "min_distance": 2,
    }
    with pytest.raises(SketchsimError, match="m <= 63"):
        greedy_code(64, 2, 2)


def test_make_code_errors():
    with pytest.raises(SketchsimError, match="only at m = 24"):
        make_code("golay-octads", 20)
    with pytest.raises(SketchsimError, match="unknown code kind"):
        make_code("nope", 10)


@pytest.mark.parametrize("m,d", [(1, 1), (24, 4), (63, 20), (64, 24), (64, 1)])
def test_greedy_filter_matches_naive(m, d):
    import naive

    from sketchsim.certify.codes import greedy_filter

    rng = np.random.default_rng(m + d)
    top = 2**m
    masks = (
        rng.integers(0, top, size=3000, dtype=np.uint64)
        if m < 64
        else rng.integers(0, 2**63, size=3000, dtype=np.uint64) * np.uint64(2)
        + rng.integers(0, 2, size=3000, dtype=np.uint64)
    )
    masks = np.concatenate([masks, np.array([0, top - 1], dtype=np.uint64)])  # zeros, all ones
    for limit in (1, 50, 10**6):
        want = naive.greedy_filter(masks, d, limit)
        np.testing.assert_array_equal(greedy_filter(masks, d, limit), want)


def test_random_code_is_a_seeded_constant_weight_code():
    from sketchsim.certify.codes import random_code

    a = random_code(64, 32, 20, limit=200, seed=5)
    assert np.array_equal(a, random_code(64, 32, 20, limit=200, seed=5))
    assert not np.array_equal(a, random_code(64, 32, 20, limit=200, seed=6))
    stats = code_stats(a)
    assert stats["weights"] == [32] and stats["min_distance"] >= 20 and 2 <= stats["size"] <= 200
    with pytest.raises(SketchsimError, match="1 <= m <= 64"):
        random_code(65, 3, 2)


def test_ctz_matches_the_lowest_set_bit():
    from sketchsim.certify.codes import _ctz

    rng = np.random.default_rng(0)
    words = [0, 1, 2, 3, 1 << 62, 1 << 63, 2**64 - 1, *rng.integers(0, 2**63, 200).tolist()]
    words += [int(w) << s for s, w in enumerate(rng.integers(1, 2**20, 44))]  # every low bit
    for v in words:
        want = 64 if v == 0 else (v & -v).bit_length() - 1  # trailing zeros; 64 for the zero word
        assert _ctz(np.uint64(v)) == want, v
