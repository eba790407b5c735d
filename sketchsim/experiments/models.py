"""Normalized single-head attention models in torch (THEORY section 2).

``y_i = <a(x_i), o_i> + b(x_i)``, ``o_i = sum_j k_ij v(x_j) / (sum_j k_ij + eps)``,
``k_ij = <phi_Q(x_i), phi_K(x_j)>``.  Tokens are float tensors ``[B, N, m]``;
``ids`` ``[B, N]`` index distinct tokens for the ``table`` map.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

__all__ = ["FEATURE_MAPS", "FeatureMap", "KernelHead", "SoftmaxHead", "MultiHead", "make_head"]

FEATURE_MAPS = ("table", "mlp", "elu1", "relu", "relu2", "favor", "hedgehog", "signed")


class FeatureMap(nn.Module):
    """``phi: {0,1}^m -> R^r``, nonnegative except ``signed``.

    Parameters
    ----------
    kind : str
        One of :data:`FEATURE_MAPS`.
    m, r : int
        Token width and number of features.
    vocab : int
        Number of distinct tokens (``table`` only).
    seed : int
        Seeds FAVOR+'s fixed random projection.
    """

    def __init__(self, kind: str, m: int, r: int, vocab: int = 0, seed: int = 0):
        super().__init__()
        if kind not in FEATURE_MAPS:
            raise ValueError(f"unknown feature map {kind!r}; choose one of {FEATURE_MAPS}")
        self.kind, self.r = kind, r
        if kind == "table":
            self.table = nn.Embedding(max(vocab, 1), r)
        elif kind == "mlp":
            self.net = nn.Sequential(nn.Linear(m, 4 * r), nn.GELU(), nn.Linear(4 * r, r))
        elif kind == "favor":
            g = torch.Generator().manual_seed(seed)
            blocks = [
                torch.linalg.qr(torch.randn(m, m, generator=g))[0] for _ in range(math.ceil(r / m))
            ]
            w = torch.cat(blocks, dim=1)[:, :r]  # orthogonal random features
            norms = torch.randn(m, r, generator=g).norm(dim=0)
            self.register_buffer("omega", w * norms)
            self.proj = nn.Linear(m, m)
        elif kind == "hedgehog":
            self.proj = nn.Linear(m, (r + 1) // 2)
        else:
            self.proj = nn.Linear(m, r)

    def forward(self, x: torch.Tensor, ids: torch.Tensor | None = None) -> torch.Tensor:
        """Features ``[B, N, r]``."""
        k = self.kind
        if k == "table":
            return F.softplus(self.table(ids))
        if k == "mlp":
            return F.softplus(self.net(x))
        if k == "favor":
            z = self.proj(x)
            u = z @ self.omega
            return torch.exp(u - 0.5 * (z * z).sum(-1, keepdim=True) - u.detach().amax()) + 1e-6
        if k == "hedgehog":
            z = self.proj(x)
            return torch.cat([torch.softmax(z, -1), torch.softmax(-z, -1)], -1)[..., : self.r]
        z = self.proj(x)
        if k == "elu1":
            return F.elu(z) + 1
        if k == "relu":
            return F.relu(z) + 1e-3
        if k == "relu2":
            return F.relu(z) ** 2 + 1e-3
        return z  # signed: unconstrained, outside the theorem


class KernelHead(nn.Module):
    """One normalized kernel attention head with value dimension ``d``."""

    def __init__(
        self,
        m: int,
        r: int,
        d: int = 0,
        feature_map: str = "table",
        vocab: int = 0,
        causal: bool = False,
        eps: float = 1e-6,
        seed: int = 0,
    ):
        super().__init__()
        d = d or m
        self.phi_q = FeatureMap(feature_map, m, r, vocab, seed)
        self.phi_k = FeatureMap(feature_map, m, r, vocab, seed + 1)
        self.value = nn.Linear(m, d)
        self.a = nn.Linear(m, d)
        self.b = nn.Linear(m, 1)
        self.causal, self.eps, self.r = causal, eps, r

    def forward(self, x, ids=None):
        """Outputs ``[B, N]`` (or ``[B, 1]`` with ``causal``: final position only)."""
        xq = x[:, -1:] if self.causal else x
        iq = None if ids is None else (ids[:, -1:] if self.causal else ids)
        k = torch.einsum("bir,bjr->bij", self.phi_q(xq, iq), self.phi_k(x, ids))
        o = torch.einsum("bij,bjd->bid", k, self.value(x)) / (k.sum(-1, keepdim=True) + self.eps)
        return (self.a(xq) * o).sum(-1) + self.b(xq).squeeze(-1)


class SoftmaxHead(nn.Module):
    """Dense softmax attention with learned m-dimensional scores and temperature."""

    def __init__(self, m: int, d: int = 0, causal: bool = False):
        super().__init__()
        d = d or m
        self.q, self.k = nn.Linear(m, m), nn.Linear(m, m)
        self.log_beta = nn.Parameter(torch.zeros(()))
        self.value, self.a, self.b = nn.Linear(m, d), nn.Linear(m, d), nn.Linear(m, 1)
        self.causal = causal

    def forward(self, x, ids=None):
        xq = x[:, -1:] if self.causal else x
        scores = torch.einsum("bim,bjm->bij", self.q(xq), self.k(x)) * self.log_beta.exp()
        o = torch.einsum("bij,bjd->bid", torch.softmax(scores, -1), self.value(x))
        return (self.a(xq) * o).sum(-1) + self.b(xq).squeeze(-1)


class MultiHead(nn.Module):
    """``H`` heads whose readouts add up."""

    def __init__(self, heads: list[nn.Module]):
        super().__init__()
        self.heads = nn.ModuleList(heads)

    def forward(self, x, ids=None):
        return sum(h(x, ids) for h in self.heads)


def make_head(
    model: str,
    m: int,
    r: int = 1,
    feature_map: str = "table",
    vocab: int = 0,
    d: int = 0,
    heads: int = 1,
    causal: bool = False,
    seed: int = 0,
) -> nn.Module:
    """Build a seeded head: ``kernel``, ``signed`` (kernel with signed features) or ``softmax``."""
    torch.manual_seed(seed)
    if model == "softmax":
        parts = [SoftmaxHead(m, d, causal) for _ in range(heads)]
    elif model in ("kernel", "signed"):
        fmap = "signed" if model == "signed" else feature_map
        parts = [KernelHead(m, r, d, fmap, vocab, causal, seed=seed + 2 * h) for h in range(heads)]
    else:
        raise ValueError(f"unknown model {model!r}; choose kernel, signed or softmax")
    return parts[0] if heads == 1 else MultiHead(parts)
