"""One normalized attention head and the constructions of THEORY section 3.

A head is given by feature maps ``phi_Q, phi_K`` (or a kernel), values ``v`` and a
query-dependent affine readout ``y_i = <a(x_i), o_i> + b(x_i)`` (THEORY section 2).
This module is the plain NumPy path; :mod:`sketchsim.heads.exhaustive` holds the jitted
closed forms that enumerate every input.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from sketchsim import config
from sketchsim.errors import SketchsimError
from sketchsim.minip.bits import as_binary

__all__ = [
    "ZeroDenominatorError",
    "normalized_head",
    "Construction",
    "Rank1",
    "Softmax",
    "OneHot",
    "make_construction",
    "CONSTRUCTIONS",
    "softmax_threshold",
]


class ZeroDenominatorError(SketchsimError):
    """Every weight of some query is zero: the normalized head is undefined there."""


def normalized_head(weights, votes) -> np.ndarray:
    """Evaluate one normalized head in vote form (THEORY section 2).

    ``y_i = sum_j w_ij g_ij / sum_j w_ij``.

    Parameters
    ----------
    weights : array_like, shape (..., Nq, Nk)
        Nonnegative kernel weights ``alpha(x_i, x_j)``.
    votes : array_like, shape (..., Nq, Nk)
        Votes ``g_i(x_j) = <a(x_i), v(x_j)> + b(x_i)``.

    Returns
    -------
    numpy.ndarray, shape (..., Nq)

    Raises
    ------
    ValueError
        On shape mismatch, a negative or non-finite weight.
    ZeroDenominatorError
        When every weight of a query is zero (reported with its index).
    """
    w = np.asarray(weights, dtype=np.float64)
    g = np.asarray(votes, dtype=np.float64)
    if w.shape != g.shape or w.ndim < 2:
        raise ValueError(f"weights {w.shape} and votes {g.shape} must share a (..., Nq, Nk) shape")
    if not np.all(np.isfinite(w)):
        raise ValueError("kernel weights must be finite")
    if np.any(w < 0):
        idx = tuple(int(i) for i in np.argwhere(w < 0)[0])
        raise ValueError(f"kernel weights must be nonnegative; weight at {idx} is {w[idx]}")
    den = w.sum(axis=-1)
    if np.any(den == 0):
        idx = tuple(int(i) for i in np.argwhere(den == 0)[0])
        raise ZeroDenominatorError(f"all kernel weights are zero for query at index {idx}")
    return (w * g).sum(axis=-1) / den


def softmax_threshold(n: int) -> float:
    """Temperature above which dense softmax is exact at length ``n``: ``ln(2(n-1))``.

    THEORY section 3b; returns 0 for ``n <= 1`` (a single token is always exact).
    """
    return math.log(2 * (n - 1)) if n > 1 else 0.0


@dataclass(frozen=True)
class Construction:
    """A normalized nonnegative head given by explicit maps.

    Subclasses define ``phi_q``, ``phi_k`` (shape (..., r)), ``values``
    (shape (..., d)) and ``readout`` returning ``(a, b)``.
    """

    name: str = "base"

    @property
    def rank(self) -> int:  # pragma: no cover - abstract
        raise NotImplementedError

    def kernel(self, Xq: np.ndarray, Xk: np.ndarray) -> np.ndarray:
        """``alpha[..., i, j] = <phi_Q(xq_i), phi_K(xk_j)>``."""
        return np.einsum("...ir,...jr->...ij", self.phi_q(Xq), self.phi_k(Xk))

    def evaluate(self, X, causal: bool = False) -> np.ndarray:
        """Outputs ``y`` for tokens ``X`` of shape (B, N, m) (or (N, m)).

        With ``causal`` only the final position is scored; the result then has
        shape (B, 1).
        """
        X = as_binary(X).astype(np.float64)
        Xq = X[..., -1:, :] if causal else X
        a, b = self.readout(Xq)
        votes = np.einsum("...id,...jd->...ij", a, self.values(X)) + b[..., None]
        return normalized_head(self.kernel(Xq, X), votes)


@dataclass(frozen=True)
class Rank1(Construction):
    """THEORY 3a: ``phi = 1``, ``v(u) = u``, ``a(x) = 2x``, ``b(x) = -|x|``; exact for N <= 2."""

    name: str = "rank1"

    @property
    def rank(self) -> int:
        return 1

    def phi_q(self, X):
        return np.ones(X.shape[:-1] + (1,))

    phi_k = phi_q

    def values(self, X):
        return np.asarray(X, dtype=np.float64)

    def readout(self, X):
        X = np.asarray(X, dtype=np.float64)
        return 2.0 * X, -X.sum(axis=-1)


@dataclass(frozen=True)
class Softmax(Construction):
    """THEORY 3b: weights ``exp(-beta <x_i, x_j>)``, ``v(u) = u``, ``a(x) = x``, ``b = 0``.

    A dense head with m-dimensional scores (``q = -beta x``, ``k = x``); its
    "rank" is the score dimension ``m``, not a nonnegative feature count.
    """

    name: str = "softmax"
    beta: float = 2.0
    m: int = 0

    @property
    def rank(self) -> int:
        return self.m

    def kernel(self, Xq, Xk):
        return np.exp(-self.beta * np.einsum("...im,...jm->...ij", Xq, Xk))

    def values(self, X):
        return np.asarray(X, dtype=np.float64)

    def readout(self, X):
        X = np.asarray(X, dtype=np.float64)
        return X, np.zeros(X.shape[:-1])


@dataclass(frozen=True)
class OneHot(Softmax):
    """THEORY 3c: ``phi_K(z) = e_z`` over ``{0,1}^m``, ``phi_Q(x)_z = exp(-beta <x, z>)``.

    ``r = 2^m`` exact positive features whose kernel equals the softmax kernel.
    """

    name: str = "onehot"

    def __post_init__(self):
        if not 1 <= self.m <= config.ONEHOT_MAX_M:
            raise ValueError(
                f"onehot needs 2^m features; m = {self.m} is outside 1..{config.ONEHOT_MAX_M}"
            )

    @property
    def rank(self) -> int:
        return 2**self.m

    def _all_tokens(self):
        z = np.arange(2**self.m)
        return ((z[:, None] >> np.arange(self.m)) & 1).astype(np.float64)

    def phi_q(self, X):
        return np.exp(-self.beta * np.asarray(X, dtype=np.float64) @ self._all_tokens().T)

    def phi_k(self, X):
        X = np.asarray(X, dtype=np.int64)
        index = X @ (1 << np.arange(self.m))
        return np.eye(2**self.m)[index]

    def kernel(self, Xq, Xk):
        return Construction.kernel(self, Xq, Xk)


CONSTRUCTIONS = ("rank1", "softmax", "onehot")


def make_construction(name: str, m: int, beta: float = 2.0) -> Construction:
    """Build a construction by name (``rank1``, ``softmax``, ``onehot``)."""
    if name == "rank1":
        return Rank1()
    if beta <= 0 or not math.isfinite(beta):
        raise ValueError(f"beta must be a positive number, got {beta}")
    if name == "softmax":
        return Softmax(beta=beta, m=m)
    if name == "onehot":
        return OneHot(beta=beta, m=m)
    raise ValueError(f"unknown construction {name!r}; choose one of {', '.join(CONSTRUCTIONS)}")
