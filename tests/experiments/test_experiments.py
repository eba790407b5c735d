"""Torch models and training (skipped only where torch is absent; CI installs it)."""

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the torch extra is not installed")
torch.set_num_threads(1)

from sketchsim.experiments.feature_maps import REGISTRY, make_feature_map  # noqa: E402
from sketchsim.experiments.models import FEATURE_MAPS, KernelHead, make_head  # noqa: E402
from sketchsim.experiments.train import fit, loss_fn, metrics, token_ids  # noqa: E402
from sketchsim.minip.kernel import minip_targets  # noqa: E402

C1, C2 = [1, 1, 1, 0, 0, 0], [0, 0, 0, 1, 1, 1]


def tiny_family():
    """The hand-worked family of test_certify: certified r >= 2."""
    t = []
    for x, c, d in ((C2, C1, C2), (C1, C2, C1)):
        t += [(x, c, c), (x, d, d), (x, c, d), (x, d, c)]
    tokens = np.array(t, dtype=np.uint8)
    return tokens, minip_targets(tokens)[:, :1]


def test_kernel_head_matches_einsum_reference():
    torch.manual_seed(0)
    head = KernelHead(m=5, r=3, d=4, feature_map="elu1")
    x = torch.randint(0, 2, (6, 3, 5)).float()
    pq, pk = head.phi_q(x), head.phi_k(x)
    k = torch.einsum("bir,bjr->bij", pq, pk)
    v = head.value(x)
    o = torch.einsum("bij,bjd->bid", k, v) / (k.sum(-1, keepdim=True) + head.eps)
    y = torch.einsum("bid,bid->bi", head.a(x), o) + head.b(x)[..., 0]
    torch.testing.assert_close(head(x), y)
    # causal: the final position only, seeing everything
    head.causal = True
    torch.testing.assert_close(head(x)[:, 0], y[:, -1])


@pytest.mark.parametrize("kind", FEATURE_MAPS)
def test_feature_maps_nonnegative_except_signed(kind):
    torch.manual_seed(1)
    x = torch.randint(0, 2, (4, 3, 7)).float()
    ids = torch.randint(0, 10, (4, 3))
    phi = make_feature_map(kind, 7, 5, vocab=10, seed=3)(x, ids)
    assert phi.shape == (4, 3, 5)
    assert REGISTRY[kind].nonnegative == (kind != "signed")
    if REGISTRY[kind].nonnegative:
        assert (phi >= 0).all()
    else:
        assert (phi < 0).any()


def run(model, r, steps=600, seed=0):
    tokens, t = tiny_family()
    ids, vocab = token_ids(tokens)
    head = make_head(model, m=6, r=r, feature_map="table", vocab=vocab, causal=False, seed=seed)
    x = torch.tensor(tokens, dtype=torch.float32)
    target = torch.tensor(t, dtype=torch.float32)
    return fit(head, x, torch.tensor(ids), target, steps=steps, seed=seed, scored=0)


def test_reported_metrics_are_those_of_the_returned_model():
    """Regression: fit used to stop on the output *before* its last step and report after it."""
    for r, steps in ((2, 200), (8, 1500)):
        tokens, t = tiny_family()
        ids, vocab = token_ids(tokens)
        head = make_head("kernel", m=6, r=r, feature_map="table", vocab=vocab, seed=0)
        x, target = torch.tensor(tokens, dtype=torch.float32), torch.tensor(t, dtype=torch.float32)
        res = fit(head, x, torch.tensor(ids), target, steps=steps, seed=0, scored=0)
        with torch.no_grad():
            again = metrics(head(x, torch.tensor(ids))[:, :1], target)
        assert (res.sequence_error, res.position_error, res.max_abs_error) == again
        if res.steps < steps:  # stopped early: exact
            assert res.sequence_error == 0.0 and res.max_abs_error < 0.5


def test_early_stop_is_exact_for_every_seed():
    for seed in range(3):
        res = run("kernel", 8, steps=1500, seed=seed)
        assert res.steps < 1500
        assert res.sequence_error == 0.0 and res.max_abs_error < 0.5


def test_nan_output_is_wrong_never_exact():
    y = torch.tensor([[float("nan")], [1.0], [float("inf")]])
    t = torch.tensor([[1.0], [1.0], [1.0]])
    seq, pos, mx = metrics(y, t)
    assert seq == pytest.approx(2 / 3) and pos == pytest.approx(2 / 3) and mx == float("inf")
    # the reported failure: an infinite learning rate made the outputs NaN and "exact"
    tokens, tt = tiny_family()
    ids, vocab = token_ids(tokens)
    head = make_head("kernel", m=6, r=1, feature_map="table", vocab=vocab, seed=0)
    x = torch.tensor(tokens, dtype=torch.float32)
    res = fit(head, x, torch.tensor(ids), torch.tensor(tt, dtype=torch.float32), 50, float("inf"))
    assert res.sequence_error == 1.0 and not res.finite


def test_minimax_loss_is_a_smooth_max():
    y, t = torch.tensor([[0.0, 0.0]]), torch.tensor([[0.0, 3.0]])
    assert loss_fn(y, t, "minimax") > loss_fn(y, t, "mse")
    assert float(loss_fn(t, t, "minimax")) == pytest.approx(0.0, abs=1e-6)
    with pytest.raises(ValueError):
        loss_fn(y, t, "nope")


def test_table_map_on_the_vocabulary_matches_per_token_softplus():
    fmap = make_feature_map("table", 4, 6, vocab=9)
    ids = torch.randint(0, 9, (5, 3))
    # the same formula; torch's vectorized softplus may differ in the last bit
    naive = torch.nn.functional.softplus(fmap.table(ids))
    torch.testing.assert_close(fmap(None, ids), naive, rtol=0, atol=2.5e-7)


def test_table_head_kernel_on_the_vocabulary_matches_the_per_input_formula():
    torch.manual_seed(2)
    head = KernelHead(m=5, r=4, d=3, feature_map="table", vocab=7)
    x = torch.randint(0, 2, (6, 3, 5)).float()
    ids = torch.randint(0, 7, (6, 3))
    sp = torch.nn.functional.softplus
    k = torch.einsum("bir,bjr->bij", sp(head.phi_q.table(ids)), sp(head.phi_k.table(ids)))
    o = torch.einsum("bij,bjd->bid", k, head.value(x)) / (k.sum(-1, keepdim=True) + head.eps)
    y = torch.einsum("bid,bid->bi", head.a(x), o) + head.b(x)[..., 0]
    torch.testing.assert_close(head(x, ids), y)


def test_favor_query_and_key_maps_share_their_random_draw():
    head = KernelHead(m=5, r=7, feature_map="favor", seed=3)
    assert torch.equal(head.phi_q.omega, head.phi_k.omega)


@pytest.mark.slow
def test_learned_softmax_on_random_triples_is_exact_on_an_unseen_family():
    """Random init, trained on random triples only, exact on the tiny family it never saw."""
    from sketchsim.experiments.suites import Split, random_triples
    from sketchsim.experiments.sweep import RunSpec, train_one

    tokens, t = tiny_family()
    family = Split(tokens, t.astype(np.float32), 0)
    for seed in range(2):
        spec = RunSpec("witness", "", "softmax", "-", 0, seed, steps=1500, train_on="random")
        run_ = train_one(spec, random_triples(6, 600, seed), family)
        assert run_.sequence_error == 0.0 and run_.max_abs_error < 0.5, run_


def test_training_is_deterministic():
    a = run("kernel", 2, steps=100, seed=4)
    b = run("kernel", 2, steps=100, seed=4)
    assert (a.max_abs_error, a.steps) == (b.max_abs_error, b.steps)


def test_metrics():
    y = torch.tensor([[0.2, 1.6], [2.0, 2.9]])
    t = torch.tensor([[0.0, 1.0], [2.0, 3.0]])
    seq, pos, mx = metrics(y, t)
    assert (seq, pos) == (0.5, 0.25) and mx == pytest.approx(0.6)


@pytest.mark.slow
def test_table_head_fits_with_large_r_but_not_with_r1():
    # the family certifies r >= 2 for every head with error < 1/2 (test_certify)
    small = run("kernel", 1, steps=1500)
    large = run("kernel", 8, steps=1500)
    assert small.sequence_error > 0 and small.max_abs_error >= 0.5
    assert large.sequence_error == 0.0 and large.max_abs_error < 0.5


def test_softmax_baseline_fits_tiny_family():
    res = run("softmax", 1, steps=1500)
    assert res.sequence_error == 0.0


def test_softmax_head_represents_the_exact_construction():
    """Set to THEORY 3b by hand (q = -2x, k = x, v = x, a = x) it is exact on the witness."""
    from sketchsim.certify import build_witness
    from sketchsim.certify.codes import hadamard_code

    fam = build_witness(hadamard_code(24), "hadamard", 12)
    head = make_head("softmax", 24, seed=0)
    with torch.no_grad():
        for lin, w in ((head.q, -2.0), (head.k, 1.0), (head.value, 1.0), (head.a, 1.0)):
            lin.weight.copy_(w * torch.eye(24))
            lin.bias.zero_()
        head.b.weight.zero_()
        head.b.bias.zero_()
        head.log_beta.zero_()
        y = head(torch.tensor(fam.tokens, dtype=torch.float32))[:, 0]
    assert (y - torch.tensor(fam.targets)).abs().max() < 1e-3


def test_per_query_baseline_of_the_ablation():
    from sketchsim.experiments.ablation import per_query_baseline
    from sketchsim.experiments.suites import Split

    tokens, t = tiny_family()
    # each query token's targets: 0, 3, 0, 0 -> mean 0.75, squared error 1.6875
    base = per_query_baseline(Split(tokens, t.astype(np.float32), 0))
    assert base == pytest.approx(((0.75**2) * 3 + 2.25**2) / 4)
