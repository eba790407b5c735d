import itertools

import numpy as np
import pytest

from sketchsim.attention import make_construction, softmax_threshold
from sketchsim.errors import SketchsimError
from sketchsim.minip import minip_targets
from sketchsim.verify import check_verify_size, decode_input, verify


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
