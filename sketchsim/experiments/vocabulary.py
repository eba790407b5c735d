"""Inputs as a vocabulary of distinct tokens and the ids that index it.

The trained suites repeat few tokens many times: the witness family has 24
distinct tokens in 408 triples, an OOD train split at most its pool (256) in
thousands of triples.  A head's per-token maps and pair scores are then
computed once per distinct token (pair) as dense ``[V, V]`` matrix products and
gathered by id, instead of once per position pair of every input; the formulas
are those of :mod:`sketchsim.experiments.models` (THEORY section 2), only the
order of the floating-point sums differs.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

__all__ = ["VOCAB_MAX", "VOCAB_WORTH", "Vocabulary"]

#: Largest vocabulary whose ``[V, V]`` pair matrices are built (64 MiB in float32).
VOCAB_MAX = 4096
#: The vocabulary path is taken when ``V^2 <= VOCAB_WORTH * B * N^2``: a ``[V, V]``
#: matrix product runs at BLAS speed, several times faster per entry than the
#: broadcast products of the per-input path.
VOCAB_WORTH = 16


@dataclass(frozen=True)
class Vocabulary:
    """Inputs ``x [B, N, m]`` as ``tokens[ids]``.

    Attributes
    ----------
    tokens : torch.Tensor
        The distinct tokens ``[V, m]`` (as the model reads them: encoded).
    ids : torch.Tensor
        Token ids ``[B, N]`` (int64) into ``tokens``.
    """

    tokens: torch.Tensor
    ids: torch.Tensor

    @classmethod
    def of(cls, x: torch.Tensor, ids: torch.Tensor | None) -> Vocabulary | None:
        """The vocabulary of inputs ``x [B, N, m]`` with token ids ``ids [B, N]``.

        Returns None (use the per-input path) without ids, when the ids do not
        index the tokens of ``x`` (equal ids for different tokens), or when the
        vocabulary is too large to pay off (:data:`VOCAB_WORTH`, :data:`VOCAB_MAX`).
        """
        if ids is None or x.dim() != 3 or ids.shape != x.shape[:2] or ids.numel() == 0:
            return None
        b, n, m = x.shape
        v = int(ids.max()) + 1
        if int(ids.min()) < 0 or v > VOCAB_MAX or v * v > VOCAB_WORTH * b * n * n:
            return None
        tokens = x.new_zeros(v, m)
        tokens[ids.reshape(-1)] = x.reshape(-1, m)
        if not torch.equal(tokens[ids], x):
            return None
        return cls(tokens, ids)

    def encoded(self, tokens: torch.Tensor) -> Vocabulary:
        """The same inputs with their tokens mapped (``tokens`` is ``[V, m']``)."""
        return replace(self, tokens=tokens)

    def query(self, causal: bool) -> torch.Tensor:
        """Ids ``[B, Nq]`` of the query positions (all; the final one when ``causal``)."""
        return self.ids[:, -1:] if causal else self.ids
