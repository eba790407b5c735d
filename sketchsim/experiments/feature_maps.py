"""Feature maps ``phi: {0,1}^m -> R^r`` of the kernel heads, one class per map.

Every map is a :class:`FeatureMap` subclass registered under its name in
:data:`REGISTRY` (as fast-transformers does); :func:`make_feature_map` builds
one by name.  A map says what it is through class attributes (``nonnegative``:
inside the theorem of THEORY section 2; ``reads_ids``: it looks tokens up by id
and cannot score an unseen token) and how many parameters it has
(:meth:`FeatureMap.parameter_count`), so no caller dispatches on the name.
"""

from __future__ import annotations

import math
from typing import ClassVar

import torch
from torch import nn
from torch.nn import functional as F

__all__ = [
    "REGISTRY",
    "FeatureMap",
    "TableMap",
    "MlpMap",
    "LinearMap",
    "Elu1Map",
    "ReluMap",
    "Relu2Map",
    "ExpMap",
    "SignedMap",
    "FavorMap",
    "HedgehogMap",
    "register",
    "make_feature_map",
    "pair_scores",
]

#: Feature-map name -> class; filled by :func:`register` in definition order.
REGISTRY: dict[str, type[FeatureMap]] = {}


def register(cls: type[FeatureMap]) -> type[FeatureMap]:
    """Class decorator: add ``cls`` to :data:`REGISTRY` under ``cls.name``."""
    if not cls.name or cls.name in REGISTRY:
        raise ValueError(f"feature map name {cls.name!r} is empty or taken")
    REGISTRY[cls.name] = cls
    return cls


def make_feature_map(name: str, m: int, r: int, vocab: int = 0, seed: int = 0) -> FeatureMap:
    """Build the map registered as ``name``.

    Parameters
    ----------
    name : str
        A key of :data:`REGISTRY`.
    m, r : int
        Token width and number of features.
    vocab : int
        Number of distinct tokens (maps that read ids only).
    seed : int
        Seeds a map's fixed random draw (``favor``).
    """
    try:
        cls = REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown feature map {name!r}; choose one of {tuple(REGISTRY)}") from None
    return cls(m, r, vocab, seed)


def pair_scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """``s_bij = <q_bi, k_bj>``; for short sequences by broadcasting, which beats
    a batched matmul of thousands of 3 x m matrices on the CPU."""
    if q.shape[1] * k.shape[1] <= 64:
        return (q.unsqueeze(2) * k.unsqueeze(1)).sum(-1)
    return torch.einsum("bir,bjr->bij", q, k)


class FeatureMap(nn.Module):
    """Base class: ``forward(x, ids)`` gives the features ``[B, N, r]``.

    Parameters
    ----------
    m, r : int
        Token width and number of features.
    vocab : int
        Number of distinct tokens (maps that read ids only).
    seed : int
        Seeds a map's fixed random draw; the query and key maps of one head
        get the same seed.
    """

    #: Registry name.
    name: ClassVar[str] = ""
    #: Nonnegative features: inside the theorem (THEORY section 2).
    nonnegative: ClassVar[bool] = True
    #: Looks tokens up by id: cannot score a token it was not built with.
    reads_ids: ClassVar[bool] = False

    def __init__(self, m: int, r: int, vocab: int = 0, seed: int = 0):
        super().__init__()
        self.r = r

    @classmethod
    def parameter_count(cls, m: int, r: int, vocab: int) -> int:
        """Trainable parameters of one map (for size checks before building it)."""
        return m * r + r

    def kernel(
        self,
        keys: FeatureMap,
        xq: torch.Tensor,
        x: torch.Tensor,
        iq: torch.Tensor | None,
        ids: torch.Tensor | None,
    ) -> torch.Tensor:
        """``k_bij = <phi_Q(xq_bi), phi_K(x_bj)>``: ``self`` is ``phi_Q``, ``keys`` is ``phi_K``."""
        return pair_scores(self(xq, iq), keys(x, ids))

    def vocab_features(self, tokens: torch.Tensor) -> torch.Tensor:
        """The features ``[V, r]`` of the distinct tokens ``[V, m]`` of a vocabulary
        (token ``v`` has id ``v``)."""
        return self(tokens, None)

    def vocab_kernel(self, keys: FeatureMap, tokens: torch.Tensor) -> torch.Tensor:
        """``K_uv = <phi_Q(token_u), phi_K(token_v)>`` on a vocabulary, ``[V, V]``."""
        return self.vocab_features(tokens) @ keys.vocab_features(tokens).T


@register
class TableMap(FeatureMap):
    """A free nonnegative vector per distinct token: ``softplus`` of an embedding table."""

    name = "table"
    reads_ids = True

    def __init__(self, m: int, r: int, vocab: int = 0, seed: int = 0):
        super().__init__(m, r, vocab, seed)
        self.table = nn.Embedding(max(vocab, 1), r)

    @classmethod
    def parameter_count(cls, m: int, r: int, vocab: int) -> int:
        return max(vocab, 1) * r

    def features(self) -> torch.Tensor:
        """The features of every token of the vocabulary, ``[V, r]``."""
        return F.softplus(self.table.weight)

    def vocab_features(self, tokens):
        # the table's rows are the vocabulary's ids: the tokens themselves are not read
        return self.features()[: tokens.shape[0]]

    def forward(self, x, ids=None):
        # softplus on the [V, r] table, then gather: the same numbers as
        # softplus(table(ids)), computed once per distinct token
        return self.features()[ids]

    def kernel(self, keys, xq, x, iq, ids):
        # the kernel on the vocabulary [V, V], then gathered: V^2 r work
        # instead of B N^2 r (the same sums, over the same r terms)
        vocab = self.features() @ keys.features().T
        return vocab[iq.unsqueeze(2), ids.unsqueeze(1)]


@register
class MlpMap(FeatureMap):
    """``softplus`` of a two-layer GELU network with ``4 r`` hidden units."""

    name = "mlp"

    def __init__(self, m: int, r: int, vocab: int = 0, seed: int = 0):
        super().__init__(m, r, vocab, seed)
        self.net = nn.Sequential(nn.Linear(m, 4 * r), nn.GELU(), nn.Linear(4 * r, r))

    @classmethod
    def parameter_count(cls, m: int, r: int, vocab: int) -> int:
        return (m * 4 * r + 4 * r) + (4 * r * r + r)

    def forward(self, x, ids=None):
        return F.softplus(self.net(x))


class LinearMap(FeatureMap):
    """A learned affine map ``z = W x + c`` (``r`` outputs) followed by :meth:`activate`."""

    def __init__(self, m: int, r: int, vocab: int = 0, seed: int = 0):
        super().__init__(m, r, vocab, seed)
        self.proj = nn.Linear(m, r)

    def activate(self, z: torch.Tensor) -> torch.Tensor:
        """The elementwise nonlinearity."""
        raise NotImplementedError

    def forward(self, x, ids=None):
        return self.activate(self.proj(x))


@register
class Elu1Map(LinearMap):
    """``elu(z) + 1`` (Katharopoulos et al.)."""

    name = "elu1"

    def activate(self, z):
        return F.elu(z) + 1


@register
class ReluMap(LinearMap):
    """``relu(z) + 10^-3``."""

    name = "relu"

    def activate(self, z):
        return F.relu(z) + 1e-3


@register
class Relu2Map(LinearMap):
    """``relu(z)^2 + 10^-3``."""

    name = "relu2"

    def activate(self, z):
        return F.relu(z) ** 2 + 1e-3


@register
class FavorMap(FeatureMap):
    """FAVOR+ with a learned projection: positive random features of ``exp(<P_q x, P_k z>)``.

    ``phi(x) = exp(omega^T P x - |P x|^2 / 2)`` (up to a global factor) with
    orthogonal Gaussian ``omega [m, r]`` drawn from ``seed``: the query and key
    maps of one head must share the draw, or the kernel is not an estimate of
    ``exp(<q, k>)``.
    """

    name = "favor"

    def __init__(self, m: int, r: int, vocab: int = 0, seed: int = 0):
        super().__init__(m, r, vocab, seed)
        g = torch.Generator().manual_seed(seed)
        blocks = [
            torch.linalg.qr(torch.randn(m, m, generator=g))[0] for _ in range(math.ceil(r / m))
        ]
        w = torch.cat(blocks, dim=1)[:, :r]  # orthogonal random features
        norms = torch.randn(m, r, generator=g).norm(dim=0)
        self.register_buffer("omega", w * norms)
        self.proj = nn.Linear(m, m)

    @classmethod
    def parameter_count(cls, m: int, r: int, vocab: int) -> int:
        return m * m + m

    def forward(self, x, ids=None):
        z = self.proj(x)
        u = z @ self.omega
        # a global shift cancels in the normalized head (same factor on every weight)
        u = u - 0.5 * (z * z).sum(-1, keepdim=True)
        return torch.exp(u - u.detach().amax()) + 1e-6


@register
class HedgehogMap(FeatureMap):
    """Hedgehog: ``[softmax(z), softmax(-z)]`` of a learned ``z = W x + c`` (``ceil(r/2)``
    outputs), cut to ``r`` features."""

    name = "hedgehog"

    def __init__(self, m: int, r: int, vocab: int = 0, seed: int = 0):
        super().__init__(m, r, vocab, seed)
        self.proj = nn.Linear(m, (r + 1) // 2)

    @classmethod
    def parameter_count(cls, m: int, r: int, vocab: int) -> int:
        return m * ((r + 1) // 2) + (r + 1) // 2

    def forward(self, x, ids=None):
        z = self.proj(x)
        return torch.cat([torch.softmax(z, -1), torch.softmax(-z, -1)], -1)[..., : self.r]


@register
class ExpMap(LinearMap):
    """``exp(z)`` of a learned ``z = W x + c``: deterministic positive features (up to a
    global factor, which cancels in the normalized head)."""

    name = "expmap"

    def activate(self, z):
        return torch.exp(z - z.detach().amax()) + 1e-6


@register
class SignedMap(LinearMap):
    """The affine map itself, unconstrained: signed features, outside the theorem."""

    name = "signed"
    nonnegative = False

    def activate(self, z):
        return z
