"""FlatAdam against torch.optim: the same arithmetic on one flat buffer."""

import math

import pytest

torch = pytest.importorskip("torch", reason="the torch extra is not installed")
torch.set_num_threads(1)

from sketchsim.experiments.models import make_head  # noqa: E402
from sketchsim.experiments.optim import FlatAdam, lr_factor  # noqa: E402


def _data():
    g = torch.Generator().manual_seed(4)
    return torch.randint(0, 2, (30, 3, 6), generator=g).float(), torch.rand(30, 3, generator=g) * 3


def _train(use_flat, name, weight_decay=0.0, clip=None, warmup=0, cosine=False, steps=25):
    x, t = _data()
    head = make_head("kernel", 6, 4, "elu1", seed=2, encoding="pm1", heads=2)
    if use_flat:
        opt = FlatAdam(
            head.parameters(), 0.02, weight_decay=weight_decay, decoupled=name == "adamw"
        )
    else:
        cls = torch.optim.AdamW if name == "adamw" else torch.optim.Adam
        opt = cls(head.parameters(), lr=0.02, weight_decay=weight_decay, foreach=False)
        sched = torch.optim.lr_scheduler.LambdaLR(
            opt, lambda s: lr_factor(s, steps, warmup, cosine)
        )
    for k in range(steps):
        opt.zero_grad()
        ((head(x) - t) ** 2).mean().backward()
        if clip and use_flat:
            opt.clip_grad_norm(clip)
        elif clip:
            torch.nn.utils.clip_grad_norm_(head.parameters(), clip)
        if use_flat:
            opt.step(lr_factor(k, steps, warmup, cosine))
        else:
            opt.step()
            sched.step()
    return [p.detach().clone() for p in head.parameters()]


@pytest.mark.parametrize(
    "kw",
    [
        {"name": "adam"},
        {"name": "adam", "weight_decay": 0.1},
        {"name": "adamw", "weight_decay": 0.1},
        {"name": "adam", "clip": 0.05, "warmup": 5, "cosine": True},
    ],
)
def test_the_same_parameters_as_torch_optim(kw):
    flat, ref = _train(True, **kw), _train(False, **kw)
    for a, b in zip(flat, ref, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7)


def test_parameters_and_gradients_are_views_of_the_flat_buffers():
    x, t = _data()
    head = make_head("softmax", 6, seed=1)
    before = [p.detach().clone() for p in head.parameters()]
    opt = FlatAdam(head.parameters(), 0.01)
    for p, b in zip(head.parameters(), before, strict=True):
        assert torch.equal(p, b)  # moved, not changed
    ((head(x) - t) ** 2).mean().backward()
    total = sum(float(p.grad.abs().sum()) for p in head.parameters())
    assert total > 0 and math.isclose(float(opt.grad.abs().sum()), total, rel_tol=1e-5)
    opt.zero_grad()
    assert all(float(p.grad.abs().sum()) == 0.0 for p in head.parameters())


def test_lr_factor_warms_up_then_decays_to_zero():
    assert [lr_factor(s, 10, 4, False) for s in (0, 3, 4, 9)] == [0.25, 1.0, 1.0, 1.0]
    assert lr_factor(4, 10, 4, True) == 1.0 and lr_factor(10, 10, 4, True) == pytest.approx(0.0)
