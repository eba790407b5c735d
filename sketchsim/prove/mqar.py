"""MQAR boxes for sum-state models: a superset family, so "proved" holds on MQAR itself.

On MQAR (:mod:`sketchsim.sketch.mqar`) the data tokens are the ``q`` query keys'
pairs ``(key_i, t_i)`` and ``pairs - q`` distractor pairs, in a hashed order. For a
one-layer ``linear`` or ``based`` model rounded at the cut (docs/theory.md 5.3) the
cut state is a sum of one term per data token, whatever their order, and each term
depends on its token alone. So over a box of answers ``t_i in [lo_i, hi_i]`` the
cut state lies in

    sum_i [min, max]_{t in [lo_i, hi_i]} term(key_i, t)  +  (pairs - q) [min, max]_d term(d),

``d`` any pair whose key is not a query key, with any value ``0..s``: every order of
the pairs and every choice of distractors (repeats included), a superset of the
family. A leaf proved there is right on every input of MQAR. The sum is moved out
by theory.md 5.5's rule for ``pairs + 1`` terms; the queries then run as on F(q, s)
(:class:`sketchsim.prove.forward.BoxModel`). Refutations are inputs of the family
itself the engine answers wrong. Other kinds, more layers and ``rounding=every``
(whose state depends on the order) are refused.
"""

from __future__ import annotations

import numpy as np

from sketchsim.errors import SketchsimError
from sketchsim.prove.forward import BoxModel, Cut
from sketchsim.prove.interval import TINY, Iv, rel_sum

__all__ = ["MQARBoxModel", "COVERED_KINDS"]

#: The kinds whose cut state is a sum of per-token terms (one layer, rounded at the cut).
COVERED_KINDS = ("linear", "based")
_CHUNK = 4096


def _streams(words: np.ndarray, m: int) -> np.ndarray:
    """``u = 2 x - 1`` of one-word tokens: bit ``b`` of each word, ``b < m``."""
    bits = (words.astype(np.uint64)[:, None] >> np.arange(m, dtype=np.uint64)) & np.uint64(1)
    return 2.0 * bits.astype(np.float64) - 1.0


class MQARBoxModel(BoxModel):
    """A one-layer sum-state causal file on MQAR, over boxes of the query keys' values."""

    @staticmethod
    def check(weights, rounding: str) -> None:
        """Refuse what this superset does not cover: other kinds, more layers, rounding
        after every token (the state then depends on the order of the pairs)."""
        a = weights.arch
        if a["kind"] not in COVERED_KINDS or a["layers"] != 1 or rounding != "cut":
            raise SketchsimError(
                "prove covers MQAR for one-layer linear and based models rounded at the cut "
                f"(a sum of per-token terms); this is {a['kind']} with {a['layers']} "
                f"layer(s), rounding {rounding}"
            )

    def __init__(self, weights, family, bits: int, rounding: str = "cut"):
        self.check(weights, rounding)
        q, kb = family.q, family.key_bits
        queries = _streams(np.asarray(family.query_keys, dtype=np.uint64), family.m)
        super().__init__(weights, None, bits, rounding, queries=queries, s=family.s)
        self.extra = family.pairs - q
        self.n_terms = family.pairs + 1
        S = family.s + 1
        vals = np.arange(S, dtype=np.uint64) << np.uint64(kb)
        words = (np.asarray(family.query_keys, dtype=np.uint64)[:, None] | vals[None, :]).ravel()
        lo, hi = self._terms(words)  # (q (s+1), H E)
        lo, hi = lo.reshape(q, S, -1), hi.reshape(q, S, -1)
        self.term_mag = np.maximum(np.abs(lo), np.abs(hi)).max(axis=1)  # (q, H E)
        # min and max over t in [a, b], per query key and entry
        self.tab_lo = np.full((q, S, S, lo.shape[2]), np.inf)
        self.tab_hi = np.full((q, S, S, lo.shape[2]), -np.inf)
        for a_ in range(S):
            run_lo, run_hi = lo[:, a_], hi[:, a_]
            for b_ in range(a_, S):
                run_lo, run_hi = np.minimum(run_lo, lo[:, b_]), np.maximum(run_hi, hi[:, b_])
                self.tab_lo[:, a_, b_], self.tab_hi[:, a_, b_] = run_lo, run_hi
        self.d_lo = np.zeros(lo.shape[2])
        self.d_hi = np.zeros(lo.shape[2])
        self.d_mag = np.zeros(lo.shape[2])
        if self.extra:
            others = np.asarray(family.other_keys, dtype=np.uint64)
            dwords = (others[:, None] | vals[None, :]).ravel()
            self.d_lo[:], self.d_hi[:] = np.inf, -np.inf
            for start in range(0, dwords.size, _CHUNK):
                l_, h_ = self._terms(dwords[start : start + _CHUNK])
                self.d_lo = np.minimum(self.d_lo, l_.min(axis=0))
                self.d_hi = np.maximum(self.d_hi, h_.max(axis=0))
            self.d_mag = np.maximum(np.abs(self.d_lo), np.abs(self.d_hi))

    def _terms(self, words: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each token's term of the cut state, every head's entries in order: (B, H E)."""
        terms = self.token_terms(_streams(words, self.m))
        B = words.size
        lo = np.concatenate([terms[h].lo.reshape(B, -1) for h in range(self.H)], axis=1)
        hi = np.concatenate([terms[h].hi.reshape(B, -1) for h in range(self.H)], axis=1)
        return lo, hi

    def cut(self, box_lo: np.ndarray, box_hi: np.ndarray) -> Cut:
        """The cut codes' ranges and the registers' states over boxes of the query keys'
        values (module docstring)."""
        idx = np.arange(self.q)
        with np.errstate(invalid="ignore", over="ignore"):
            lo = self.tab_lo[idx, box_lo, box_hi].sum(axis=1) + self.extra * self.d_lo
            hi = self.tab_hi[idx, box_lo, box_hi].sum(axis=1) + self.extra * self.d_hi
            mag = self.term_mag.sum(axis=0) + self.extra * self.d_mag
            margin = rel_sum(self.n_terms) * mag + self.n_terms * TINY
        flat = Iv(lo - margin, hi + margin)
        B = box_lo.shape[0]
        shape = self._state_shape()
        codes_lo, codes_hi, states = [], [], {}
        for h in range(self.H):
            part = flat[:, h * self.E : (h + 1) * self.E]
            cl, ch, st = self._quant(0, h, part)
            codes_lo.append(cl)
            codes_hi.append(ch)
            states[(0, h)] = Iv(st.lo.reshape(B, *shape), st.hi.reshape(B, *shape))
        return Cut(np.concatenate(codes_lo, axis=1), np.concatenate(codes_hi, axis=1), states)

    def corner_points(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Counterexample candidates: each box's lowest and highest answer vector (inputs
        of the family itself, its distractors and order hashed from the answers)."""
        return np.unique(np.concatenate([lo, hi]), axis=0)
