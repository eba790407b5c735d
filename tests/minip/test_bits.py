import naive
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nojit import run_without_jit

from sketchsim import minip_targets, pack_bits, unpack_bits
from sketchsim.minip.bits import popcount64, trailing_zeros64
from sketchsim.minip.kernel import minip_targets_packed

EDGE_M = [1, 63, 64, 65, 128, 456]


@pytest.mark.parametrize("m", EDGE_M)
def test_pack_matches_naive_and_roundtrips(m):
    X = np.random.default_rng(m).integers(0, 2, (7, 3, m))
    W = pack_bits(X)
    assert W.dtype == np.uint64 and W.shape == (7, 3, (m + 63) // 64)
    np.testing.assert_array_equal(W, naive.pack_bits(X))
    np.testing.assert_array_equal(unpack_bits(W, m), X)


def test_pack_bool_input_and_high_bit():
    x = np.zeros(64, dtype=bool)
    x[63] = True
    assert int(pack_bits(x)[0]) == 1 << 63


@pytest.mark.parametrize("value", [0, 1, 2**63, 2**64 - 1, 0x5555555555555555])
def test_popcount_edges(value):
    assert popcount64(np.uint64(value)) == bin(value).count("1")


def test_popcount_random_words():
    rng = np.random.default_rng(0)
    words = rng.integers(0, 2**64 - 1, 500, dtype=np.uint64, endpoint=True)
    for w in words:
        assert popcount64(w) == int(w).bit_count()
    for k in range(65):  # the k lowest bits set: 0 .. all ones
        assert popcount64(np.uint64((1 << k) - 1)) == int((1 << k) - 1).bit_count() == k


def _trailing_zeros_words():
    rng = np.random.default_rng(1)
    words = [0, 1, 2, 3, 1 << 63, 2**64 - 1, *rng.integers(1, 2**63, 100).tolist()]
    return words + [int(w) << s for s, w in enumerate(rng.integers(1, 2**16, 48))]


def test_trailing_zeros_is_the_lowest_set_bit():
    for x in _trailing_zeros_words():
        expected = (x & -x).bit_length() - 1 if x else 64
        assert trailing_zeros64(np.uint64(x)) == expected, x


def test_trailing_zeros_without_jit():
    code = (
        "import numpy as np; from sketchsim.minip.bits import trailing_zeros64;"
        "print([trailing_zeros64(np.uint64(x)) for x in (0, 1, 12, 1 << 63, 2**64 - 1)])"
    )
    assert run_without_jit(code)[0] == "[64, 0, 2, 63, 0]"


@pytest.mark.parametrize("m", EDGE_M)
@pytest.mark.parametrize("n", [1, 2, 3, 7])
def test_minip_matches_naive_random(m, n):
    X = np.random.default_rng(1000 * m + n).integers(0, 2, (20, n, m))
    np.testing.assert_array_equal(minip_targets(X), naive.minip_targets(X))


@pytest.mark.parametrize("m", EDGE_M)
@pytest.mark.parametrize("fill", [0, 1])
def test_minip_all_zero_all_one(m, fill, kernel_path):
    X = np.full((2, 3, m), fill, dtype=np.uint8)
    assert (minip_targets(X) == fill * m).all()


@pytest.mark.parametrize("m", EDGE_M)
def test_minip_single_token_is_its_weight(m):
    X = np.random.default_rng(m).integers(0, 2, (5, 1, m))
    np.testing.assert_array_equal(minip_targets(X)[:, 0], X.sum(axis=(1, 2)))


def test_minip_shapes_and_empty_batch():
    assert minip_targets(np.zeros((0, 3, 5), dtype=bool)).shape == (0, 3)
    assert minip_targets([[1, 1, 0], [0, 1, 1], [1, 1, 1]]).tolist() == [1, 1, 2]


@pytest.mark.parametrize(
    "bad, match",
    [
        (np.full((2, 3, 4), 2), "only 0 and 1"),
        (np.zeros((2, 3, 0), dtype=int), "m = 0"),
        (np.zeros((4,), dtype=int), "rank"),
        (np.zeros((1, 2, 3, 4), dtype=int), "rank"),
        (np.full((2, 3), 0.5), "dtype"),
        (np.zeros((0, 4), dtype=int), "N = 0"),
    ],
)
def test_minip_rejects_bad_input(bad, match):
    with pytest.raises(ValueError, match=match):
        minip_targets(bad)


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 130).flatmap(
        lambda m: st.tuples(st.just(m), st.integers(1, 5), st.integers(0, 2**32 - 1))
    )
)
def test_minip_hypothesis(args):
    m, n, seed = args
    X = np.random.default_rng(seed).integers(0, 2, (3, n, m)).astype(bool)
    np.testing.assert_array_equal(minip_targets(X), naive.minip_targets(X))


def test_no_jit_fallback_agrees(tmp_path):
    """NUMBA_DISABLE_JIT=1 must still work (Python popcount fallback)."""
    code = (
        "import numpy as np, sketchsim;"
        "from sketchsim.minip.kernel import minip_targets_packed;"
        "X=np.random.default_rng(5).integers(0,2,(4,3,70));"
        "print(sketchsim.minip_targets(X).tolist());"
        "print(sketchsim.minip_targets(X[:, :2, :5]).tolist());"
        "print(minip_targets_packed(sketchsim.pack_bits(X[:, :, :65])).tolist())"
    )
    lines = run_without_jit(code)
    X = np.random.default_rng(5).integers(0, 2, (4, 3, 70))
    expected = [naive.minip_targets(x).tolist() for x in (X, X[:, :2, :5], X[:, :, :65])]
    assert lines[:3] == [str(e) for e in expected]


# -- the byte-packing kernel: every branch of the packer and of the row minima --

PACK_M = [1, 5, 7, 8, 9, 24, 63, 64, 65, 70, 100, 127, 128, 129, 456]


@pytest.mark.parametrize("m", PACK_M)
@pytest.mark.parametrize("n", [1, 2, 3, 4, 31, 32, 33])
def test_minip_bytes_and_packed_match_naive(m, n, kernel_path):
    X = np.random.default_rng(7 * m + n).integers(0, 2, (9, n, m), dtype=np.uint8)
    expected = naive.minip_targets(X)
    np.testing.assert_array_equal(minip_targets(X), expected)
    np.testing.assert_array_equal(minip_targets_packed(naive.pack_bits(X)), expected)


def test_minip_many_parallel_tasks(kernel_path):
    # several tasks per call (each task packs a slice of the batch)
    X = np.random.default_rng(3).integers(0, 2, (6000, 3, 70), dtype=np.uint8)
    np.testing.assert_array_equal(minip_targets(X), naive.minip_targets(X))
    X = np.random.default_rng(4).integers(0, 2, (300, 40, 130), dtype=np.uint8)
    np.testing.assert_array_equal(minip_targets(X), naive.minip_targets(X))
    np.testing.assert_array_equal(minip_targets_packed(pack_bits(X)), naive.minip_targets(X))


@pytest.mark.parametrize("m", PACK_M)
def test_minip_sparse_tokens_single_bits(m):
    # one bit per token, at every position: catches a misplaced bit in any branch
    n = min(m, 40)
    X = np.zeros((m, n, m), dtype=np.uint8)
    for b in range(m):
        for i in range(n):
            X[b, i, (b + i) % m] = 1
    np.testing.assert_array_equal(minip_targets(X), naive.minip_targets(X))


@pytest.mark.parametrize("m", PACK_M)
def test_minip_rejects_non_binary_byte_anywhere(m, kernel_path):
    for k in {0, m // 2, m - 1}:
        X = np.zeros((4, 3, m), dtype=np.uint8)
        X[2, 1, k] = 2
        with pytest.raises(ValueError, match="only 0 and 1, found 1 other"):
            minip_targets(X)


def test_minip_non_contiguous_and_bool_views():
    X = np.random.default_rng(9).integers(0, 2, (10, 6, 80), dtype=np.uint8)
    view = X[::2, ::2, 3:]
    np.testing.assert_array_equal(minip_targets(view), naive.minip_targets(view))
    np.testing.assert_array_equal(minip_targets(view.astype(bool)), naive.minip_targets(view))


def test_gather8_is_the_byte_gather():
    from sketchsim.minip.bits import gather8, load_u64

    rng = np.random.default_rng(0)
    for _ in range(50):
        b = rng.integers(0, 2, 16, dtype=np.uint8)
        word = int(load_u64(b, 3))
        assert word == int.from_bytes(b[3:11].tobytes(), "little")
        assert int(gather8(np.uint64(word))) == sum(int(b[3 + i]) << i for i in range(8))
