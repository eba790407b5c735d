"""Each causal recurrence against the flash-linear-attention reference it corresponds to.

The fla functions named below (``fla-core``'s ``fla/ops/*/naive.py``, pure torch)
get the same projections and gates as :meth:`CausalLayer.recur`, which steps one
token at a time; outputs and final states must agree in float64.  fla ships no
Mamba reference: that recurrence is checked against the discretized SSM written
out (Gu and Dao 2023, eq. 2a-2b).  fla is the ``fla`` extra (``.ci/run`` installs it).
"""

import math

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("fla", reason="flash-linear-attention (the fla extra) is not installed")

from torch.nn import functional as F  # noqa: E402

from sketchsim.experiments.causal_models import CausalLayer, causal_arch  # noqa: E402

B, T, H, R, D = 2, 7, 2, 4, 3


def _run(kind, q, k, v, gates, **arch):
    """Our recurrence over ``T`` tokens: outputs ``[B, T, H, D]`` and the final state."""
    torch.manual_seed(0)
    layer = CausalLayer(causal_arch(kind, 5, 1, H, R, D, **arch)).double()
    st = torch.zeros(B, H, layer.entries, dtype=torch.float64)
    outs = []
    for t in range(T):
        g = {name: x[:, t] for name, x in gates.items()}
        o, st = layer.recur(q[:, t], k[:, t], v[:, t], g, st, t + 1)
        outs.append(o)
    return torch.stack(outs, 1), st, layer


def _qkv(seed=1):
    gen = torch.Generator().manual_seed(seed)
    q, k = (torch.randn(B, T, H, R, generator=gen, dtype=torch.float64) for _ in range(2))
    return q, k, torch.randn(B, T, H, D, generator=gen, dtype=torch.float64), gen


def _fla_features(fmap):
    """fla's ``LinearAttention`` features: ``elu`` (then, for ``elu1sum``, its ``norm_q`` /
    ``norm_k``: ``x / (x.sum(-1) + 1e-4)``), or ``identity`` for ``signed``."""
    if fmap == "signed":
        return lambda z: z
    if fmap == "elu1":
        return lambda z: F.elu(z) + 1
    return lambda z: (F.elu(z) + 1) / ((F.elu(z) + 1).sum(-1, True) + 1e-4)


@pytest.mark.parametrize("fmap", ["elu1", "signed", "elu1sum"])
def test_linear_matches_naive_recurrent_linear_attn(fmap):
    from fla.ops.linear_attn.naive import naive_recurrent_linear_attn

    q, k, v, _ = _qkv()
    o, st, _ = _run("linear", q, k, v, {}, feature_map=fmap, eps=1e-10)
    act = _fla_features(fmap)
    ref, _ = naive_recurrent_linear_attn(
        act(q), act(k), v, scale=1.0, normalize=fmap == "elu1", output_final_state=True
    )
    # fla computes in float32 whatever it is given
    assert torch.allclose(o, ref.double(), rtol=1e-4, atol=1e-5)
    S = st.view(B, H, R, -1)[..., :D]
    _, S_ref = naive_recurrent_linear_attn(act(q), act(k), v, scale=1.0, output_final_state=True)
    assert torch.allclose(S, S_ref.double(), rtol=1e-4, atol=1e-5)


def test_based_matches_naive_parallel_based():
    from fla.ops.based.naive import naive_parallel_based

    q, k, v, _ = _qkv()
    o, _, _ = _run("based", q, k, v, {})
    heads_first = [x.transpose(1, 2) for x in (q, k, v)]
    ref = naive_parallel_based(*heads_first, use_norm=True).transpose(1, 2)
    assert torch.allclose(o, ref, rtol=1e-9, atol=1e-10)


def test_gla_matches_naive_recurrent_gla():
    from fla.ops.gla.naive import naive_recurrent_gla

    q, k, v, gen = _qkv()
    gk = F.logsigmoid(torch.randn(B, T, H, R, generator=gen, dtype=torch.float64)) / 16
    o, st, _ = _run("gla", q, k, v, {"gk": gk})
    ref, S_ref = naive_recurrent_gla(q, k, v, gk, output_final_state=True)
    assert torch.allclose(o, ref.double(), rtol=1e-4, atol=1e-5)
    assert torch.allclose(st.view(B, H, R, D), S_ref.double(), rtol=1e-4, atol=1e-5)


def test_deltanet_matches_delta_rule_recurrence():
    from fla.ops.delta_rule.naive import delta_rule_recurrence

    q, k, v, gen = _qkv()
    beta = torch.sigmoid(torch.randn(B, T, H, 1, generator=gen, dtype=torch.float64))
    o, st, _ = _run("deltanet", q, k, v, {"beta": beta})
    qn, kn = F.normalize(q, dim=-1), F.normalize(k, dim=-1)
    hf = [x.transpose(1, 2).float() for x in (qn, kn, v, beta[..., 0])]  # float32 inside
    ref, S_ref = delta_rule_recurrence(*hf)
    assert torch.allclose(o, ref.transpose(1, 2).double(), rtol=1e-4, atol=1e-5)
    assert torch.allclose(st.view(B, H, R, D), S_ref.double(), rtol=1e-4, atol=1e-5)


def test_gated_deltanet_matches_naive_recurrent_gated_delta_rule():
    from fla.ops.gated_delta_rule.naive import naive_recurrent_gated_delta_rule

    q, k, v, gen = _qkv()
    beta = torch.sigmoid(torch.randn(B, T, H, 1, generator=gen, dtype=torch.float64))
    g = -F.softplus(torch.randn(B, T, H, generator=gen, dtype=torch.float64))
    o, st, _ = _run("gated-deltanet", q, k, v, {"beta": beta, "g": g})
    qn, kn = F.normalize(q, dim=-1), F.normalize(k, dim=-1)
    args = [x.float() for x in (qn, kn, v, beta[..., 0], g)]  # it computes in float32
    ref, S_ref = naive_recurrent_gated_delta_rule(*args, output_final_state=True)
    assert torch.allclose(o, ref.double(), rtol=1e-4, atol=1e-5)
    assert torch.allclose(st.view(B, H, R, D), S_ref.double(), rtol=1e-4, atol=1e-5)


def test_window_matches_naive_parallel_attn():
    from fla.ops.attn.naive import naive_parallel_attn

    q, k, v, _ = _qkv()
    for w in (1, 3, T + 2):
        o, _, _ = _run("window", q, k, v, {}, window=w)
        ref = naive_parallel_attn(q, k, v, window_size=w)[0]
        assert torch.allclose(o, ref.double(), rtol=1e-4, atol=1e-5), w


def test_mamba_matches_the_discretized_ssm():
    """h_t = exp(dt A) h_{t-1} + dt B_t x_t, y_t = C_t h_t + D x_t, per channel c."""
    q, k, v, gen = _qkv()
    dt = F.softplus(torch.randn(B, T, H, D, generator=gen, dtype=torch.float64))
    o, st, layer = _run("mamba", q, k, v, {"dt": dt})
    A = -torch.exp(layer.alog.detach())  # [H, R, D]
    h = torch.zeros(B, H, R, D, dtype=torch.float64)
    for t in range(T):
        for c in range(D):
            dtc = dt[:, t, :, c].view(B, H, 1)
            h[..., c] = torch.exp(dtc * A[..., c]) * h[..., c] + dtc * k[:, t] * v[:, t, :, c, None]
            y = (q[:, t] * h[..., c]).sum(-1) + layer.dskip.detach()[:, c] * v[:, t, :, c]
            assert torch.allclose(o[:, t, :, c], y, rtol=1e-12, atol=1e-12)
    assert torch.allclose(st.view(B, H, R, D), h)
    assert math.isclose(
        float(A[0, 1, 0]), -2.0, rel_tol=1e-6
    )  # S4D-real initialization A_k = -(k + 1)


def test_retention_matches_naive_retention():
    """RetNet: head h decays by 1 - 2^(-5-h) (the layer's own gates), o = (q / sqrt(r))^T S."""
    from fla.ops.retention.naive import naive_retention

    q, k, v, _ = _qkv()
    layer = CausalLayer(causal_arch("retention", 5, 1, H, R, D)).double()
    gk = layer.gates(torch.zeros(B, 5, dtype=torch.float64))["gk"]
    want = torch.tensor([1 - 2.0 ** (-5 - h) for h in range(H)], dtype=torch.float64)
    assert torch.allclose(torch.exp(gk), want.view(1, H, 1).expand(B, H, R))
    o, st, _ = _run("retention", q, k, v, {"gk": gk.unsqueeze(1).expand(B, T, H, R)})
    ref = naive_retention(*(x.transpose(1, 2) for x in (q, k, v))).transpose(1, 2)
    assert torch.allclose(o, ref.double(), rtol=1e-5, atol=1e-6)  # fla computes in float32
