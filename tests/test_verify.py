import itertools
import math

import naive
import numpy as np
import pytest

from sketchsim.attention import make_construction, softmax_threshold
from sketchsim.errors import SketchsimError
from sketchsim.minip import minip_targets
from sketchsim.verify import check_range, check_verify_size, decode_input, verify


def reference_verify(m, n, construction, beta=2.0, causal=False):
    """Enumerate with the NumPy feature-map path (small sizes only)."""
    X = np.array(list(itertools.product([0, 1], repeat=m * n)), dtype=np.uint8)
    X = X[:, ::-1].reshape(-1, n, m)  # row k of product order == index k, bit 0 first
    head = make_construction(construction, m, beta)
    y = head.evaluate(X, causal=causal)
    t = minip_targets(X)[:, -1:] if causal else minip_targets(X)
    err = np.abs(y - t)
    return err.max(), (err < 0.5).all(axis=1).mean()


@pytest.mark.parametrize(
    "m,n,construction,causal",
    [
        (3, 3, "rank1", False),
        (2, 4, "rank1", True),
        (3, 3, "softmax", False),
        (2, 3, "onehot", False),
        (4, 2, "rank1", False),
        (1, 5, "softmax", True),
    ],
)
def test_jitted_matches_reference(m, n, construction, causal):
    res = verify(m, n, construction, beta=1.2, causal=causal)
    max_err, frac = reference_verify(m, n, construction, beta=1.2, causal=causal)
    assert res.inputs == 2 ** (m * n)
    assert res.max_abs_error == pytest.approx(max_err, abs=1e-12)
    assert res.exact_fraction == pytest.approx(frac)


def test_decode_input_order():
    X = decode_input(0b000110, 3, 2)
    assert X.tolist() == [[0, 1, 1], [0, 0, 0]]


@pytest.mark.parametrize("m", range(1, 9))
@pytest.mark.parametrize("n", [1, 2])
def test_rank1_exact_up_to_two_tokens(m, n):
    res = verify(m, n, "rank1")
    assert res.exact_fraction == 1.0 and res.counterexample is None
    assert res.max_abs_error == 0.0


@pytest.mark.parametrize("m", [2, 3, 4, 5])
def test_rank1_fails_at_n3(m):
    res = verify(m, 3, "rank1")
    ce = res.counterexample
    assert ce is not None and res.exact_fraction < 1
    X = np.array(ce["tokens"])
    assert minip_targets(X)[ce["position"] - 1] == ce["target"]
    assert abs(ce["output"] - ce["target"]) >= 0.5


def test_rank1_at_n3_m1_is_exact():
    # with one bit the N=3 head is still exact: the failure needs m >= 2
    assert verify(1, 3, "rank1").counterexample is None


@pytest.mark.parametrize("m", [4, 6, 8])
def test_softmax_beta2_exact_at_n3(m):
    res = verify(m, 3, "softmax", beta=2.0)
    assert res.counterexample is None
    assert res.max_abs_error < 0.5


def test_softmax_worst_error_m4_beta2_matches_theory():
    assert verify(4, 3, "softmax", 2.0).max_abs_error == pytest.approx(0.213, abs=5e-4)


def test_softmax_below_threshold_fails():
    # at N = 6 the threshold is ln 10 ~ 2.30; beta = 0.5 is far below it
    assert verify(3, 6, "softmax", beta=0.5).counterexample is not None


@pytest.mark.parametrize("m,n", [(2, 5), (3, 4), (4, 3)])
def test_onehot_exact_above_threshold(m, n):
    beta = softmax_threshold(n) + 0.05
    res = verify(m, n, "onehot", beta=beta)
    assert res.counterexample is None and res.rank == 2**m


def test_size_limits():
    with pytest.raises(SketchsimError, match="limit 26"):
        check_verify_size(9, 3)
    with pytest.raises(SketchsimError, match="--m"):
        check_verify_size(0, 3)
    with pytest.raises(SketchsimError, match="--n"):
        check_verify_size(3, 0)


NEAR_THRESHOLD = math.log(6) / 2  # exact N = 3 softmax threshold (THEORY 3b): ties at 1/2


@pytest.mark.parametrize(
    "m,n,construction,beta,causal",
    [
        (3, 3, "rank1", 2.0, False),
        (3, 3, "softmax", 1.2, False),
        (3, 3, "softmax", 0.5, True),
        (2, 4, "rank1", 2.0, True),
        (2, 4, "softmax", 0.7, False),
        (1, 5, "softmax", 0.3, False),
        (4, 2, "rank1", 2.0, False),
        (5, 1, "softmax", 2.0, False),
        (1, 1, "rank1", 2.0, False),
        (3, 3, "softmax", NEAR_THRESHOLD, False),
        (2, 3, "onehot", NEAR_THRESHOLD, True),
        (3, 3, "softmax", 30.0, False),
    ],
)
def test_kernel_bit_identical_to_naive(m, n, construction, beta, causal):
    res = verify(m, n, construction, beta=beta, causal=causal)
    max_err, exact, first_bad = naive.verify_enumeration(m, n, construction, beta, causal)
    assert res.max_abs_error == max_err  # bit for bit, not approximately
    assert res.exact_fraction == exact / 2 ** (m * n)
    assert (res.counterexample or {"index": -1})["index"] == first_bad


@pytest.mark.parametrize("construction", ["rank1", "softmax"])
def test_ranges_merge_to_the_whole(construction):
    # arbitrary splits of the enumeration (cluster shards, chunks) give the same totals
    m, n, beta = 3, 3, 0.6
    whole = check_range(construction, m, n, beta, False, 0, 512)
    parts = [
        check_range(construction, m, n, beta, False, a, b - a)
        for a, b in [(0, 7), (7, 200), (200, 201), (201, 512)]
    ]
    bads = [p[2] for p in parts if p[2] >= 0]
    assert max(p[0] for p in parts) == whole[0]
    assert sum(p[1] for p in parts) == whole[1]
    assert min(bads, default=-1) == whole[2]
    assert whole == naive.verify_enumeration(m, n, construction, beta, False)
