import naive
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sketchsim import minip_targets, pack_bits, unpack_bits
from sketchsim.bits import popcount64

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


@pytest.mark.parametrize("m", EDGE_M)
@pytest.mark.parametrize("n", [1, 2, 3, 7])
def test_minip_matches_naive_random(m, n):
    X = np.random.default_rng(1000 * m + n).integers(0, 2, (20, n, m))
    np.testing.assert_array_equal(minip_targets(X), naive.minip_targets(X))


@pytest.mark.parametrize("m", EDGE_M)
@pytest.mark.parametrize("fill", [0, 1])
def test_minip_all_zero_all_one(m, fill):
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
    import os
    import subprocess
    import sys

    code = (
        "import numpy as np, sketchsim;"
        "X=np.random.default_rng(5).integers(0,2,(4,3,70));"
        "print(sketchsim.minip_targets(X).tolist())"
    )
    env = dict(os.environ, NUMBA_DISABLE_JIT="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    X = np.random.default_rng(5).integers(0, 2, (4, 3, 70))
    assert out.stdout.strip() == str(naive.minip_targets(X).tolist())
