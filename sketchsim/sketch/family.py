"""The hard Min-IP family F(q, s) of THEORY section 5.

``m = q*s + s + 1``: ``q`` blocks of ``s`` bits, then a pad of ``s + 1`` bits.
Query ``i`` (position ``i``, 0-based) is ``block_i OR pad``; the data token
(position ``q``) has ``t_i`` ones inside block ``i`` (which ones: a seeded
permutation per block) and none in the pad.  The answer at query ``i`` is ``t_i``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from numba import njit, prange

from sketchsim.bits import n_words, pack_bits
from sketchsim.errors import SketchsimError
from sketchsim.sketch.protocol import Context

__all__ = ["HardFamily", "MAX_BYTES_PER_INPUT", "MAX_INPUTS"]

MAX_BYTES_PER_INPUT = 1 << 26
MAX_INPUTS = 1 << 26


@njit(parallel=True, cache=True)
def _build_tokens(T, qwords, perm, out):
    B, q = T.shape
    for b in prange(B):
        for i in range(q):
            out[b, i, :] = qwords[i]
        out[b, q, :] = 0
        for i in range(q):
            for r in range(T[b, i]):
                bit = perm[i, r]
                out[b, q, bit >> 6] |= np.uint64(1) << np.uint64(bit & 63)


@dataclass
class HardFamily:
    """F(q, s) with a seeded choice of which bits inside each block are set.

    Parameters
    ----------
    q, s : int
        Number of queries and largest answer (answers in ``0..s``).
    seed : int
        Seeds the bit layout; sampling draws from the same generator stream.
    """

    q: int
    s: int
    seed: int = 0
    perm: np.ndarray = field(init=False, repr=False)
    query_words: np.ndarray = field(init=False, repr=False)

    def __post_init__(self):
        if self.q < 1:
            raise SketchsimError(f"--q must be >= 1, got {self.q}")
        if self.s < 1:
            raise SketchsimError(f"--s must be >= 1, got {self.s}")
        if self.bytes_per_input > MAX_BYTES_PER_INPUT:
            raise SketchsimError(
                f"F(q={self.q}, s={self.s}) has {self.n_tokens} tokens of {self.m} bits: "
                f"{self.bytes_per_input / 2**20:.0f} MiB per input exceeds "
                f"{MAX_BYTES_PER_INPUT / 2**20:.0f} MiB"
            )
        rng = np.random.default_rng(self.seed)
        self.perm = np.stack([i * self.s + rng.permutation(self.s) for i in range(self.q)]).astype(
            np.int64
        )
        Q = np.zeros((self.q, self.m), dtype=np.uint8)
        for i in range(self.q):
            Q[i, i * self.s : (i + 1) * self.s] = 1
        Q[:, self.q * self.s :] = 1
        self.query_words = pack_bits(Q)

    @property
    def m(self) -> int:
        return self.q * self.s + self.s + 1

    @property
    def n_tokens(self) -> int:
        return self.q + 1

    @property
    def words(self) -> int:
        return n_words(self.m)

    @property
    def bytes_per_input(self) -> int:
        return self.n_tokens * self.words * 8

    @property
    def bound_bits(self) -> float:
        """``q log2(s + 1)``: the transcript lower bound."""
        return self.q * math.log2(self.s + 1)

    @property
    def size(self) -> int:
        """``(s+1)^q`` answer vectors."""
        return (self.s + 1) ** self.q

    def context(self) -> Context:
        return Context(self.q, self.s, self.m, self.n_tokens)

    def all_answers(self) -> np.ndarray:
        """Every answer vector, shape ((s+1)^q, q) uint8, in mixed-radix order."""
        if self.size > MAX_INPUTS:
            raise SketchsimError(
                f"exhaustive F(q={self.q}, s={self.s}) has {self.size:.3g} inputs, "
                f"more than the limit 2^{MAX_INPUTS.bit_length() - 1}; use --samples"
            )
        idx = np.arange(self.size, dtype=np.int64)
        powers = (self.s + 1) ** np.arange(self.q - 1, -1, -1, dtype=np.int64)
        return ((idx[:, None] // powers) % (self.s + 1)).astype(np.uint8)

    def sample_answers(self, k: int) -> np.ndarray:
        """``k`` answer vectors drawn uniformly with the family's seed."""
        if k < 1:
            raise SketchsimError(f"--samples must be >= 1, got {k}")
        if k > MAX_INPUTS:
            raise SketchsimError(f"--samples {k} exceeds the limit {MAX_INPUTS}")
        rng = np.random.default_rng([self.seed, 1])
        return rng.integers(0, self.s + 1, size=(k, self.q), dtype=np.uint8)

    def tokens(self, T: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """Packed tokens (B, q + 1, words) of the inputs with answer vectors ``T``.

        ``out``, when given, is a buffer with at least ``B`` rows that is reused.
        """
        T = np.ascontiguousarray(T, dtype=np.uint8)
        shape = (T.shape[0], self.n_tokens, self.words)
        out = np.empty(shape, dtype=np.uint64) if out is None else out[: T.shape[0]]
        _build_tokens(T, self.query_words, self.perm, out)
        return out

    def chunk_size(self) -> int:
        """Inputs per engine chunk: about 32 MiB of tokens."""
        return max(1, min(16384, (1 << 25) // self.bytes_per_input))
