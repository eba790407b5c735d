"""The eight-lane Min-IP path (sketchsim.minip.lanes): blocks of 8 sequences, lane-major."""

from __future__ import annotations

import naive
import numpy as np
import pytest
from nojit import run_without_jit
from numba import njit

from sketchsim import minip_targets
from sketchsim.minip.kernel import _scratch, _task_size, minip_targets_packed, uses_lanes
from sketchsim.minip.lanes import LANES, lane_row_minima, transpose8, transpose_lanes

EDGE_M = [1, 63, 64, 65, 128, 456]
LANE_N = [4, 5, 16, 31]
# batches around the block size: partial blocks only, one full block plus a tail, ...
BATCHES = [1, 7, 9, 23]


@njit
def _transpose(W, P, base, K):
    transpose_lanes(W, P, base, K)  # intrinsics are called from jitted code only


@njit
def _transpose8(src, src_base, src_stride, dst, dst_base, dst_stride, tiles):
    transpose8(src, src_base, src_stride, dst, dst_base, dst_stride, tiles)


@njit
def _row_minima_of_block(P, mins, n, nw):
    for i in range(n - 1):
        lane_row_minima(P, mins, i, n, nw)


def _check(X):
    expected = naive.minip_targets(X)
    np.testing.assert_array_equal(minip_targets(X), expected)
    np.testing.assert_array_equal(minip_targets_packed(naive.pack_bits(X)), expected)


@pytest.mark.parametrize("m", EDGE_M)
@pytest.mark.parametrize("n", LANE_N)
def test_lane_path_matches_naive(n, m, kernel_path):
    assert uses_lanes(n, (m + 63) // 64)
    for B in BATCHES:
        X = np.random.default_rng(1000 * n + 10 * m + B).integers(0, 2, (B, n, m), dtype=np.uint8)
        _check(X)


@pytest.mark.parametrize("m", EDGE_M)
@pytest.mark.parametrize("n", LANE_N)
@pytest.mark.parametrize("fill", [0, 1])
def test_lane_path_all_zeros_all_ones(n, m, fill, kernel_path):
    X = np.full((11, n, m), fill, dtype=np.uint8)
    np.testing.assert_array_equal(minip_targets(X), np.full((11, n), fill * m))
    np.testing.assert_array_equal(
        minip_targets_packed(naive.pack_bits(X)), np.full((11, n), fill * m)
    )


@pytest.mark.parametrize("n", LANE_N)
def test_lane_minimum_in_any_lane_and_token(n):
    """A planted minimum (a token sharing one bit with every other) is found in each lane."""
    m = 130
    B = 2 * LANES + 3
    rng = np.random.default_rng(n)
    X = (rng.random((B, n, m)) < 0.7).astype(np.uint8)
    for b in range(B):
        t = (3 * b) % n
        X[b, t] = 0
        X[b, t, b % m] = 1  # <x_t, x_j> <= 1 for every j
    _check(X)


@pytest.mark.parametrize("n", [4, 32, 33, 64])
def test_lane_path_long_sequences(n, kernel_path):
    # N >= 32 takes the lane path too (the vectorised all-keys loop is now its fallback)
    X = np.random.default_rng(n).integers(0, 2, (13, n, 456), dtype=np.uint8)
    _check(X)


def test_fallback_beyond_the_lane_scratch():
    # a lane block of 8 x 4 x 8193 words exceeds the 2 MiB scratch: one sequence at a time
    for n, m in [(4, 64 * 8193), (33, 64 * 1000)]:
        assert not uses_lanes(n, (m + 63) // 64)
        X = np.random.default_rng(n).integers(0, 2, (2, n, m), dtype=np.uint8)
        _check(X)


def test_short_sequences_stay_scalar():
    assert not uses_lanes(3, 8)
    assert not uses_lanes(2, 8)
    assert uses_lanes(4, 1)


@pytest.mark.parametrize("n,nw", [(4, 1), (5, 2), (16, 8), (31, 3), (64, 8)])
def test_parallel_tasks_are_whole_blocks(n, nw):
    assert _task_size(n, nw) % LANES == 0


@pytest.mark.parametrize("n,nw", [(4, 1), (5, 3), (16, 8), (3, 5)])
def test_transpose_lanes_matches_numpy(n, nw):
    K = n * nw
    W = np.random.default_rng(K).integers(0, 2**63, (10, n, nw), dtype=np.uint64)
    P = np.zeros(LANES * K, dtype=np.uint64)
    base = 2 * K  # sequences 2 .. 9
    _transpose(W, P, base, K)
    k_vec = K - K % LANES
    expected = W[2:10].reshape(LANES, K).T.reshape(-1)
    np.testing.assert_array_equal(P[: LANES * k_vec], expected[: LANES * k_vec])
    assert not P[LANES * k_vec :].any()  # the last K % 8 columns are the caller's


@pytest.mark.parametrize("dtype", [np.int64, np.uint64])
def test_transpose8_with_strides(dtype):
    # the minima's way back: (token, lane) tiles into rows of a (B, N) array, N = 19
    src = np.arange(3 * 64, dtype=dtype) * 7
    dst = np.full((11, 19), -1 if dtype == np.int64 else 2**64 - 1, dtype=dtype)
    _transpose8(src, 64, 8, dst, 2 * 19 + 5, 19, 1)
    tile = src[64:128].reshape(8, 8)  # rows r = tokens, columns c = lanes
    np.testing.assert_array_equal(dst[2:10, 5:13], tile.T)
    untouched = np.ones(dst.shape, dtype=bool)
    untouched[2:10, 5:13] = False
    assert (dst[untouched] == dst[0, 0]).all()
    # several tiles along the columns of 8 rows of stride K
    K = 24
    W = np.arange(8 * K, dtype=dtype)
    P = np.zeros(8 * K, dtype=dtype)
    _transpose8(W, 0, K, P, 0, 8, K // 8)
    np.testing.assert_array_equal(P, W.reshape(8, K).T.reshape(-1))


@pytest.mark.parametrize("nw", [1, 2, 7])
def test_lane_row_minima_matches_pair_counts(nw):
    n = 9  # rows with 8 keys (two passes of 4) down to 1 key (the one-key tail)
    W = np.random.default_rng(nw).integers(0, 2**63, (LANES, n, nw), dtype=np.uint64)
    P, mins = _scratch(n, nw)
    P[:] = W.reshape(LANES, n * nw).T.reshape(-1)
    mins[:] = 1 << 62
    _row_minima_of_block(P, mins, n, nw)
    bits = np.unpackbits(W.view(np.uint8), axis=-1)
    gram = np.einsum("bim,bjm->bij", bits.astype(np.int64), bits.astype(np.int64))
    gram[:, np.arange(n), np.arange(n)] = 1 << 62  # self terms are not counted
    np.testing.assert_array_equal(mins.reshape(n, LANES).T, gram.min(axis=-1))


def test_scratch_is_aligned_for_512_bit_vectors():
    for n, nw in [(4, 1), (16, 8), (5, 3)]:
        P, mins = _scratch(n, nw)
        assert P.ctypes.data % 64 == 0 and mins.ctypes.data % 64 == 0
        assert P.size >= LANES * n * nw and mins.size == LANES * n


def test_lane_path_without_jit():
    """NUMBA_DISABLE_JIT=1: the Python stand-ins of the two lane helpers agree."""
    code = (
        "import numpy as np, sketchsim;"
        "from sketchsim.minip.kernel import minip_targets_packed;"
        "X=np.random.default_rng(11).integers(0,2,(11,5,70));"
        "print(sketchsim.minip_targets(X).tolist());"
        "print(minip_targets_packed(sketchsim.pack_bits(X[:, :4, :65])).tolist());"
        "Y=np.random.default_rng(12).integers(0,2,(17,9,70));"
        "print(sketchsim.minip_targets(Y).tolist())"
    )
    lines = run_without_jit(code)
    X = np.random.default_rng(11).integers(0, 2, (11, 5, 70))
    Y = np.random.default_rng(12).integers(0, 2, (17, 9, 70))  # 8 x 8 tiles of minima
    expected = [naive.minip_targets(x).tolist() for x in (X, X[:, :4, :65], Y)]
    assert lines[:3] == [str(e) for e in expected]
