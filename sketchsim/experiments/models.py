"""Normalized single-head attention models in torch (THEORY section 2).

``y_i = <a(x_i), o_i> + b(x_i)``, ``o_i = sum_j k_ij v(x_j) / (sum_j k_ij + eps)``,
``k_ij = <phi_Q(x_i), phi_K(x_j)>``.  Tokens are float tensors ``[B, N, m]``;
``ids`` ``[B, N]`` index distinct tokens for the ``table`` map.
"""

from __future__ import annotations

import torch
from torch import nn

from sketchsim.experiments.feature_maps import (
    REGISTRY,
    FeatureMap,
    make_feature_map,
)
from sketchsim.experiments.softmax_kernel import softmax_readout
from sketchsim.experiments.vocab_readout import kernel_readout, softmax_readout_vocab
from sketchsim.experiments.vocabulary import Vocabulary

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
    "predict",
]

#: Feature-map names (the keys of :data:`~sketchsim.experiments.feature_maps.REGISTRY`,
#: one class per map there).  ``favor`` is FAVOR+ with a learned projection:
#: positive random features of ``exp(<P_q x, P_k z>)`` with one shared Gaussian
#: draw for queries and keys.
FEATURE_MAPS = tuple(REGISTRY)

MODELS = ("kernel", "signed", "softmax")

#: Input encodings: ``01`` feeds tokens as they are, ``pm1`` as ``2x - 1``.
#: Every layer that reads a token is affine with a bias, so both give the same
#: function class; ``pm1`` only conditions the optimization better.
ENCODINGS = ("01", "pm1")


def _mix(w: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """``o_bid = sum_j w_bij v_bjd`` (broadcast for short sequences, as
    :func:`~sketchsim.experiments.feature_maps.pair_scores`)."""
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
        self.phi_q = make_feature_map(feature_map, m, r, vocab, seed)
        self.phi_k = make_feature_map(feature_map, m, r, vocab, seed)
        self.value = nn.Linear(m, d)
        self.a = nn.Linear(m, d)
        self.b = nn.Linear(m, 1)
        self.causal, self.eps, self.r = causal, eps, r

    def forward(self, x, ids=None):
        """Outputs ``[B, N]`` (or ``[B, 1]`` with ``causal``: final position only)."""
        xq = x[:, -1:] if self.causal else x
        iq = None if ids is None else (ids[:, -1:] if self.causal else ids)
        k = self.phi_q.kernel(self.phi_k, xq, x, iq, ids)
        o = _mix(k, self.value(x)) / (k.sum(-1, keepdim=True) + self.eps)
        return (self.a(xq) * o).sum(-1) + self.b(xq).squeeze(-1)

    def forward_vocab(self, voc: Vocabulary) -> torch.Tensor:
        """:meth:`forward` of ``voc.tokens[voc.ids]``, computed on the vocabulary.

        ``<a_i, o_i> = sum_j k_ij <a_i, v_j> / (sum_j k_ij + eps)``, and both
        ``k`` and ``<a, v>`` are ``[V, V]`` matrix products on the distinct tokens.
        """
        tokens = voc.tokens
        k = self.phi_q.vocab_kernel(self.phi_k, tokens)
        av = self.a(tokens) @ self.value(tokens).T
        bias = self.b(tokens).squeeze(-1)
        return kernel_readout(k, av, bias, voc.query(self.causal), voc.ids, self.eps)


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
        # <a_i, o_i> = sum_j w_ij <a_i, v_j>: one jitted pass on the CPU
        q = self.q(xq) * self.log_beta.exp()
        y = softmax_readout(q, self.k(x), self.value(x), self.a(xq))
        return y + self.b(xq).squeeze(-1)

    def forward_vocab(self, voc: Vocabulary) -> torch.Tensor:
        """:meth:`forward` of ``voc.tokens[voc.ids]``: scores and ``<a, v>`` on the vocabulary."""
        tokens = voc.tokens
        s = (self.q(tokens) @ self.k(tokens).T) * self.log_beta.exp()
        av = self.a(tokens) @ self.value(tokens).T
        bias = self.b(tokens).squeeze(-1)
        return softmax_readout_vocab(s, av, bias, voc.query(self.causal), voc.ids)


class MultiHead(nn.Module):
    """``H`` heads whose readouts add up."""

    def __init__(self, heads: list[nn.Module]):
        super().__init__()
        self.heads = nn.ModuleList(heads)

    def forward(self, x, ids=None):
        return sum(h(x, ids) for h in self.heads)

    def forward_vocab(self, voc: Vocabulary) -> torch.Tensor:
        return sum(h.forward_vocab(voc) for h in self.heads)


class Encoded(nn.Module):
    """Feed a head ``2x - 1`` instead of ``x`` (see :data:`ENCODINGS`)."""

    def __init__(self, head: nn.Module):
        super().__init__()
        self.head = head

    def forward(self, x, ids=None):
        return self.head(2 * x - 1, ids)

    def forward_vocab(self, voc: Vocabulary) -> torch.Tensor:
        return self.head.forward_vocab(voc.encoded(2 * voc.tokens - 1))


def predict(model: nn.Module, x: torch.Tensor, ids: torch.Tensor | None, voc=None):
    """``model(x, ids)``, computed on the vocabulary ``voc`` when one is given
    and the model can (a head of this module: ``forward_vocab``)."""
    if voc is not None and hasattr(model, "forward_vocab"):
        return model.forward_vocab(voc)
    return model(x, ids)


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
    per_map = REGISTRY[fmap].parameter_count(m, r, vocab)
    return heads * (2 * per_map + readout)
