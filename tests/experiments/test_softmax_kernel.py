"""The jitted softmax readout against its torch formula: values and first derivatives."""

import pytest

torch = pytest.importorskip("torch", reason="the torch extra is not installed")
torch.set_num_threads(1)

from nojit import with_and_without_jit  # noqa: E402

from sketchsim.experiments.softmax_kernel import (  # noqa: E402
    softmax_readout,
    softmax_readout_reference,
)


def _draw(shapes, dtype, scale=1.0, seed=0):
    g = torch.Generator().manual_seed(seed)
    inputs = [torch.randn(s, generator=g, dtype=dtype) for s in shapes]
    inputs[0] = inputs[0] * scale
    return inputs, g


def _both(inputs, g, functions=(softmax_readout, softmax_readout_reference)):
    up = None
    out = []
    for f in functions:
        leaves = [t.clone().requires_grad_() for t in inputs]
        y = f(*leaves)
        if up is None:
            up = torch.randn(y.shape, generator=g)  # float32 draws, whatever the dtype
        (y * up.to(y.dtype)).sum().backward()
        out.append([y.detach()] + [t.grad for t in leaves])
    return out


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize(
    ("b", "nq", "n", "e", "d"),
    [(50, 3, 3, 24, 24), (9, 1, 3, 5, 4), (4, 1, 1, 3, 3), (6, 5, 5, 4, 7), (1, 2, 2, 1, 1)],
)
def test_values_and_gradients_match_the_torch_formula(dtype, b, nq, n, e, d):
    shapes = [(b, nq, e), (b, n, e), (b, n, d), (b, nq, d)]
    fast, ref = _both(*_draw(shapes, dtype))
    tol = {"rtol": 1e-5, "atol": 1e-5} if dtype == torch.float32 else {"rtol": 1e-11, "atol": 1e-11}
    for name, a, r in zip(("y", "dq", "dk", "dv", "da"), fast, ref, strict=True):
        torch.testing.assert_close(a, r, **tol, msg=name)


def test_large_scores_do_not_overflow():
    shapes = [(20, 3, 6), (20, 3, 6), (20, 3, 4), (20, 3, 4)]
    inputs, _ = _draw(shapes, torch.float32, scale=300.0, seed=3)
    # the torch formula in float64 on the same float32 draws, the same upstream gradient
    (fast,) = _both(inputs, torch.Generator().manual_seed(5), (softmax_readout,))
    (exact,) = _both(
        [t.double() for t in inputs], torch.Generator().manual_seed(5), (softmax_readout_reference,)
    )
    assert all(bool(torch.isfinite(t).all()) for t in fast)
    for a, r in zip(fast, exact, strict=True):
        # scores of a few thousand: float32 inputs carry relative rounding of 1e-7
        torch.testing.assert_close(a.double(), r, rtol=1e-3, atol=1e-3)


def test_the_plain_python_path_gives_the_same_numbers():
    jitted, plain = with_and_without_jit(
        "import torch\n"
        "from sketchsim.experiments.softmax_kernel import softmax_readout as f\n"
        "g = torch.Generator().manual_seed(1)\n"
        "ts = [torch.randn(3, 2, 4, generator=g, dtype=torch.float64).requires_grad_()"
        " for _ in range(4)]\n"
        "y = f(*ts); y.sum().backward()\n"
        "result = [y.tolist()] + [t.grad.tolist() for t in ts]\n"
    )
    for a, b in zip(plain, jitted, strict=True):
        torch.testing.assert_close(torch.tensor(a), torch.tensor(b), rtol=1e-12, atol=1e-12)


def test_dtypes_without_a_kernel_use_the_torch_formula():
    inputs, _ = _draw([(5, 3, 4), (5, 3, 4), (5, 3, 2), (5, 3, 2)], torch.float32)
    half = [t.half() for t in inputs]
    got = softmax_readout(*half)
    assert got.dtype == torch.float16
    torch.testing.assert_close(got, softmax_readout_reference(*half))


def test_softmax_in_place_matches_numpy():
    import numpy as np

    from sketchsim.experiments.softmax_kernel import softmax_in_place

    rng = np.random.default_rng(0)
    rows = [rng.normal(0, 3, (4, 2, 7)), rng.normal(0, 1, (1, 1, 1)), np.zeros((2, 3, 5))]
    rows.append(np.array([[[800.0, 799.0, -800.0, 0.0]]]))  # exp overflows without the shift
    rows.append(np.array([[[0.0, -np.inf, 2.0, -np.inf]]]))  # weight 0 where the score is -inf
    for w in rows:
        for n in range(1, w.shape[2] + 1):
            got = w.copy()
            for b in range(w.shape[0]):
                for i in range(w.shape[1]):
                    softmax_in_place(got, b, i, n)
            head = w[..., :n] - w[..., :n].max(axis=-1, keepdims=True)
            want = np.exp(head) / np.exp(head).sum(axis=-1, keepdims=True)
            np.testing.assert_allclose(got[..., :n], want, rtol=1e-14, atol=0)
            np.testing.assert_array_equal(got[..., n:], w[..., n:])  # the rest untouched
