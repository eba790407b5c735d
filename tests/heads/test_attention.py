import naive
import numpy as np
import pytest

from sketchsim.heads.attention import (
    OneHot,
    Rank1,
    Softmax,
    ZeroDenominatorError,
    make_construction,
    normalized_head,
)


def test_normalized_head_matches_direct_formula():
    rng = np.random.default_rng(0)
    w = rng.random((4, 3, 5))
    g = rng.normal(size=(4, 3, 5))
    expected = np.array(
        [
            [sum(w[b, i, j] * g[b, i, j] for j in range(5)) / sum(w[b, i]) for i in range(3)]
            for b in range(4)
        ]
    )
    np.testing.assert_allclose(normalized_head(w, g), expected)


def test_normalizer_sums_over_keys_not_queries():
    # a classic slip: normalizing over the query axis; non-square weights catch it
    w = np.array([[1.0, 3.0]])
    g = np.array([[0.0, 4.0]])
    assert normalized_head(w, g)[0] == pytest.approx(3.0)


def test_zero_denominator_is_reported():
    with pytest.raises(ZeroDenominatorError, match=r"index \(1,\)"):
        normalized_head([[1.0, 0.0], [0.0, 0.0]], [[1.0, 1.0], [1.0, 1.0]])


def test_negative_weight_rejected():
    with pytest.raises(ValueError, match="nonnegative"):
        normalized_head([[1.0, -0.1]], [[1.0, 1.0]])


@pytest.mark.parametrize("m", [1, 5, 8])
def test_rank1_exact_at_n_le_2(m):
    X = np.random.default_rng(m).integers(0, 2, (200, 2, m))
    np.testing.assert_allclose(Rank1().evaluate(X), naive.minip_targets(X), atol=1e-12)
    np.testing.assert_allclose(Rank1().evaluate(X[:, :1]), naive.minip_targets(X[:, :1]))


def test_rank1_at_n3_is_the_theory_formula():
    X = np.random.default_rng(1).integers(0, 2, (50, 3, 6))
    x, y, z = X[:, 0], X[:, 1], X[:, 2]
    dot = lambda a, b: (a * b).sum(-1)  # noqa: E731
    expected = (2 * dot(x, y) + 2 * dot(x, z) - dot(x, x)) / 3
    np.testing.assert_allclose(Rank1().evaluate(X)[:, 0], expected)


@pytest.mark.parametrize("m", [1, 3, 6])
def test_onehot_features_give_the_softmax_kernel(m):
    X = np.random.default_rng(m).integers(0, 2, (30, 3, m))
    soft, onehot = Softmax(beta=1.7, m=m), OneHot(beta=1.7, m=m)
    assert onehot.rank == 2**m
    assert (onehot.phi_q(X) >= 0).all() and (onehot.phi_k(X) >= 0).all()
    np.testing.assert_allclose(onehot.kernel(X, X), soft.kernel(X, X), rtol=1e-12)
    np.testing.assert_allclose(onehot.evaluate(X), soft.evaluate(X), rtol=1e-12)


def test_onehot_refuses_large_m():
    with pytest.raises(ValueError, match="m = 21"):
        make_construction("onehot", 21)


def test_softmax_causal_scores_last_position():
    X = np.random.default_rng(3).integers(0, 2, (10, 4, 5))
    full = Softmax(beta=3.0, m=5).evaluate(X)
    causal = Softmax(beta=3.0, m=5).evaluate(X, causal=True)
    np.testing.assert_allclose(causal[:, 0], full[:, -1])


def test_bad_beta_and_name():
    with pytest.raises(ValueError, match="beta"):
        make_construction("softmax", 4, beta=0.0)
    with pytest.raises(ValueError, match="unknown construction"):
        make_construction("nope", 4)
