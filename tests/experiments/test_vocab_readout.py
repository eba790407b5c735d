"""The jitted vocabulary readouts against their torch formula: values and first derivatives."""

import pytest

torch = pytest.importorskip("torch", reason="the torch extra is not installed")
torch.set_num_threads(1)

from nojit import with_and_without_jit  # noqa: E402

from sketchsim.experiments.vocab_readout import (  # noqa: E402
    kernel_readout,
    readout_reference,
    softmax_readout_vocab,
)


def _case(v, b, n, nq, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    mat = torch.rand(v, v, generator=g, dtype=dtype) + 0.05  # a positive kernel
    av = torch.randn(v, v, generator=g, dtype=dtype)
    bias = torch.randn(v, generator=g, dtype=dtype)
    ids = torch.randint(0, v, (b, n), generator=g)  # repeats within an input included
    iq = ids[:, -nq:]
    up = torch.randn(b, nq, generator=g, dtype=dtype)
    return (mat, av, bias), iq, ids, up


def _run(fn, leaves, iq, ids, up, *extra):
    leaves = [t.clone().requires_grad_() for t in leaves]
    y = fn(*leaves, iq, ids, *extra)
    (y * up).sum().backward()
    return [y.detach()] + [t.grad for t in leaves]


@pytest.mark.parametrize("kind", ["kernel", "softmax"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize(("v", "b", "n", "nq"), [(24, 60, 3, 3), (5, 40, 3, 1), (1, 3, 2, 2)])
def test_values_and_gradients_match_the_torch_formula(kind, dtype, v, b, n, nq):
    leaves, iq, ids, up = _case(v, b, n, nq, dtype, seed=v + n)
    if kind == "kernel":
        fast = _run(kernel_readout, leaves, iq, ids, up, 1e-6)
        ref = _run(lambda *a: readout_reference("kernel", *a), leaves, iq, ids, up, 1e-6)
    else:
        fast = _run(softmax_readout_vocab, leaves, iq, ids, up)
        ref = _run(lambda *a: readout_reference("softmax", *a), leaves, iq, ids, up)
    tol = {"rtol": 1e-5, "atol": 1e-5} if dtype == torch.float32 else {"rtol": 1e-11, "atol": 1e-11}
    for name, a, r in zip(("y", "dmat", "dav", "dbias"), fast, ref, strict=True):
        torch.testing.assert_close(a, r, **tol, msg=f"{kind} {name}")


def test_the_plain_python_path_gives_the_same_numbers():
    jitted, plain = with_and_without_jit(
        "import torch\n"
        "from sketchsim.experiments.vocab_readout import kernel_readout, softmax_readout_vocab\n"
        "g = torch.Generator().manual_seed(2)\n"
        "k = (torch.rand(4, 4, generator=g, dtype=torch.float64) + 0.1).requires_grad_()\n"
        "av = torch.randn(4, 4, generator=g, dtype=torch.float64).requires_grad_()\n"
        "b = torch.randn(4, generator=g, dtype=torch.float64).requires_grad_()\n"
        "ids = torch.randint(0, 4, (5, 3), generator=g)\n"
        "y = kernel_readout(k, av, b, ids, ids, 1e-6) + softmax_readout_vocab(k, av, b, ids, ids)\n"
        "y.sum().backward()\n"
        "result = [y.tolist(), k.grad.tolist(), av.grad.tolist(), b.grad.tolist()]\n"
    )
    for a, w in zip(plain, jitted, strict=True):
        torch.testing.assert_close(torch.tensor(a), torch.tensor(w), rtol=1e-12, atol=1e-12)


def test_dtypes_without_a_kernel_use_the_torch_formula():
    # float16 (and any non-CPU device) takes readout_reference: the path CUDA runs
    leaves, iq, ids, _ = _case(6, 10, 3, 3, torch.float32, seed=1)
    half = [t.half() for t in leaves]
    got = kernel_readout(*half, iq, ids, 1e-3)
    assert got.dtype == torch.float16
    torch.testing.assert_close(got, readout_reference("kernel", *half, iq, ids, 1e-3))
    got = softmax_readout_vocab(*half, iq, ids)
    torch.testing.assert_close(got, readout_reference("softmax", *half, iq, ids))
