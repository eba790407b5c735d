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

__all__ = [
    "ENCODINGS",
    "FEATURE_MAPS",
    "MODELS",
    "FeatureMap",
    "KernelHead",
    "SoftmaxHead",
    "MultiHead",
    "Encoded",
    "make_head",
    "head_parameters",
]

#: Feature maps, one branch each in :class:`FeatureMap`.  ``favor`` is FAVOR+
#: with a learned projection: positive random features of ``exp(<P_q x, P_k z>)``
#: with one shared Gaussian draw for queries and keys.
FEATURE_MAPS = ("table", "mlp", "elu1", "relu", "relu2", "favor", "hedgehog", "expmap", "signed")

MODELS = ("kernel", "signed", "softmax")

#: Input encodings: ``01`` feeds tokens as they are, ``pm1`` as ``2x - 1``.
#: Every layer that reads a token is affine with a bias, so both give the same
#: function class; ``pm1`` only conditions the optimization better.
ENCODINGS = ("01", "pm1")


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
        # ``seed`` fixes the random draw of ``favor``: query and key maps of one
        # head must share it, or the kernel is not an estimate of exp(<q, k>).
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
            # softplus on the [V, r] table, then gather: the same numbers as
            # softplus(table(ids)), computed once per distinct token
            return F.softplus(self.table.weight)[ids]
        if k == "mlp":
            return F.softplus(self.net(x))
        if k == "favor":
            z = self.proj(x)
            u = z @ self.omega
            # a global shift cancels in the normalized head (same factor on every weight)
            u = u - 0.5 * (z * z).sum(-1, keepdim=True)
            return torch.exp(u - u.detach().amax()) + 1e-6
        if k == "expmap":
            u = self.proj(x)
            return torch.exp(u - u.detach().amax()) + 1e-6
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


def _scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """``s_bij = <q_bi, k_bj>``; for short sequences by broadcasting, which beats
    a batched matmul of thousands of 3 x m matrices on the CPU."""
    if q.shape[1] * k.shape[1] <= 64:
        return (q.unsqueeze(2) * k.unsqueeze(1)).sum(-1)
    return torch.einsum("bir,bjr->bij", q, k)


def _mix(w: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """``o_bid = sum_j w_bij v_bjd`` (see :func:`_scores`)."""
    if w.shape[1] * w.shape[2] <= 64:
        return (w.unsqueeze(-1) * v.unsqueeze(1)).sum(2)
    return torch.einsum("bij,bjd->bid", w, v)


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
        self.phi_k = FeatureMap(feature_map, m, r, vocab, seed)
        self.value = nn.Linear(m, d)
        self.a = nn.Linear(m, d)
        self.b = nn.Linear(m, 1)
        self.causal, self.eps, self.r = causal, eps, r

    def forward(self, x, ids=None):
        """Outputs ``[B, N]`` (or ``[B, 1]`` with ``causal``: final position only)."""
        xq = x[:, -1:] if self.causal else x
        iq = None if ids is None else (ids[:, -1:] if self.causal else ids)
        if self.phi_q.kind == "table":
            # the kernel on the vocabulary [V, V], then gathered: V^2 r work
            # instead of B N^2 r (the same sums, over the same r terms)
            vocab = F.softplus(self.phi_q.table.weight) @ F.softplus(self.phi_k.table.weight).T
            k = vocab[iq.unsqueeze(2), ids.unsqueeze(1)]
        else:
            k = _scores(self.phi_q(xq, iq), self.phi_k(x, ids))
        o = _mix(k, self.value(x)) / (k.sum(-1, keepdim=True) + self.eps)
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
        scores = _scores(self.q(xq), self.k(x)) * self.log_beta.exp()
        o = _mix(torch.softmax(scores, -1), self.value(x))
        return (self.a(xq) * o).sum(-1) + self.b(xq).squeeze(-1)


class MultiHead(nn.Module):
    """``H`` heads whose readouts add up."""

    def __init__(self, heads: list[nn.Module]):
        super().__init__()
        self.heads = nn.ModuleList(heads)

    def forward(self, x, ids=None):
        return sum(h(x, ids) for h in self.heads)


class Encoded(nn.Module):
    """Feed a head ``2x - 1`` instead of ``x`` (see :data:`ENCODINGS`)."""

    def __init__(self, head: nn.Module):
        super().__init__()
        self.head = head

    def forward(self, x, ids=None):
        return self.head(2 * x - 1, ids)


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
    eps: float = 1e-6,
    encoding: str = "01",
) -> nn.Module:
    """Build a seeded head: ``kernel``, ``signed`` (kernel with signed features) or ``softmax``.

    Parameters
    ----------
    model : str
        One of :data:`MODELS`.
    m, r, d : int
        Token width, feature rank, value dimension (0: ``m``).
    heads : int
        Number of heads whose readouts add up.
    eps : float
        The kernel normalizer's epsilon.
    encoding : str
        One of :data:`ENCODINGS`.
    """
    torch.manual_seed(seed)
    if model == "softmax":
        parts = [SoftmaxHead(m, d, causal) for _ in range(heads)]
    elif model in ("kernel", "signed"):
        fmap = "signed" if model == "signed" else feature_map
        parts = [
            KernelHead(m, r, d, fmap, vocab, causal, eps=eps, seed=seed + 2 * h)
            for h in range(heads)
        ]
    else:
        raise ValueError(f"unknown model {model!r}; choose one of {MODELS}")
    if encoding not in ENCODINGS:
        raise ValueError(f"unknown encoding {encoding!r}; choose one of {ENCODINGS}")
    head = parts[0] if heads == 1 else MultiHead(parts)
    return Encoded(head) if encoding == "pm1" else head


def head_parameters(
    model: str, m: int, r: int, feature_map: str, vocab: int, heads: int = 1, d: int = 0
) -> int:
    """Parameter count of :func:`make_head` without building it (for size checks)."""
    d = d or m
    readout = 2 * (m * d + d) + m + 1  # value, a, b
    if model == "softmax":
        return heads * (2 * (m * m + m) + 1 + readout)
    fmap = "signed" if model == "signed" else feature_map
    per_map = {
        "table": max(vocab, 1) * r,
        "mlp": (m * 4 * r + 4 * r) + (4 * r * r + r),
        "favor": m * m + m,
        "hedgehog": m * ((r + 1) // 2) + (r + 1) // 2,
    }.get(fmap, m * r + r)
    return heads * (2 * per_map + readout)
