"""Multi-query associative recall (MQAR) as a family (zoology's task, fixed queries).

zoology (Arora et al. 2023, ``multiquery_ar``) builds sequences of key/value
pairs with keys drawn without replacement from a key vocabulary, followed by
query keys whose answers are the values bound to them.  Here, to fit THEORY
section 5, the ``q`` query tokens are *fixed* keys (a seeded choice of ``q``
distinct keys of the vocabulary ``0..keys-1``) and only the data tokens vary:

- ``pairs`` data tokens (positions ``q..q+pairs-1``), each one key/value pair;
  keys are distinct within an input; the ``q`` query keys are always present
  and the other ``pairs - q`` are distractor keys;
- the value bound to query key ``i`` is the answer ``t_i`` in ``0..s``
  (``V = s + 1`` values), independent and uniform; distractor values, the
  distractor keys and the order of the pairs are a seeded hash of ``t``.

Token layout (``m = key_bits + value_bits <= 64`` bits, one word): the key in
bits ``0..key_bits-1``, the value above it; query tokens carry value 0.  The
bound is the entropy of the answer vector, ``q log2 V``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from sketchsim.errors import FamilyError
from sketchsim.sketch.family import Family, FamilyType
from sketchsim.sketch.protocol import Context, Param

__all__ = ["MQARContext", "MQARFamily", "MQAR", "MQAR_MAX_KEYS"]

#: Largest key vocabulary (distractor keys are drawn by sorting one hash per key).
MQAR_MAX_KEYS = 1 << 16

_MASK = np.uint64(0xFFFFFFFFFFFFFFFF)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64 finalizer on a uint64 array (wrapping arithmetic)."""
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


@dataclass(frozen=True)
class MQARContext(Context):
    """:class:`Context` plus the MQAR layout a protocol needs to read tokens."""

    keys: int = 0
    pairs: int = 0
    key_bits: int = 0
    value_bits: int = 0


@dataclass
class MQARFamily(Family):
    """MQAR with ``q`` fixed query keys and values in ``0..s``.

    Parameters
    ----------
    q, s : int
        Queries and largest value (``V = s + 1`` values).
    seed : int
        Seeds the query keys and the per-input hash (distractors, order).
    keys : int
        Key vocabulary size (0: ``pairs``).
    pairs : int
        Key/value data tokens (0: ``q``); ``pairs - q`` are distractors.
    shuffle : bool
        Place the pairs in a seeded random order per input (else query keys first).
    """

    q: int
    s: int
    seed: int = 0
    keys: int = 0
    pairs: int = 0
    shuffle: bool = True
    query_keys: np.ndarray = field(init=False, repr=False)
    other_keys: np.ndarray = field(init=False, repr=False)
    name = "mqar"

    def __post_init__(self):
        if self.q < 1:
            raise FamilyError(f"q must be >= 1, got {self.q}")
        if self.s < 1:
            raise FamilyError(f"s must be >= 1, got {self.s}")
        # each pair has its own key: pairs (q when not given) is bounded by the key limit
        # too, and named as such, not as the keys it would default the vocabulary to
        for name, value in (("q", self.q), ("pairs", self.pairs), ("keys", self.keys)):
            if value > MQAR_MAX_KEYS:
                raise FamilyError(
                    f"mqar {name}={value} is too large: at most {MQAR_MAX_KEYS} "
                    "(q <= pairs <= keys, each pair's key distinct)"
                )
        self.pairs = self.pairs or self.q
        self.keys = self.keys or self.pairs
        if self.pairs < self.q:
            raise FamilyError(f"mqar needs pairs >= q, got pairs={self.pairs}, q={self.q}")
        if self.keys < self.pairs:
            raise FamilyError(f"mqar needs keys >= pairs, got keys={self.keys}, pairs={self.pairs}")
        if self.value_bits > 32:
            raise FamilyError(f"mqar values need s < 2^32, got s={self.s}")
        rng = np.random.default_rng([self.seed, 7])
        chosen = np.sort(rng.choice(self.keys, self.q, replace=False)).astype(np.uint64)
        self.query_keys = chosen
        self.other_keys = np.setdiff1d(np.arange(self.keys, dtype=np.uint64), chosen)

    @property
    def key_bits(self) -> int:
        return max(1, math.ceil(math.log2(self.keys)))

    @property
    def value_bits(self) -> int:
        return max(1, math.ceil(math.log2(self.s + 1)))

    @property
    def m(self) -> int:
        return self.key_bits + self.value_bits

    @property
    def n_tokens(self) -> int:
        return self.q + self.pairs

    def context(self) -> MQARContext:
        return MQARContext(
            self.q,
            self.s,
            self.m,
            self.n_tokens,
            self.keys,
            self.pairs,
            self.key_bits,
            self.value_bits,
        )

    def describe(self) -> str:
        return f"MQAR(q={self.q}, V={self.s + 1}, keys={self.keys}, pairs={self.pairs})"

    def options(self) -> dict:
        return {"keys": self.keys, "pairs": self.pairs, "shuffle": self.shuffle}

    def chunk_size(self) -> int:
        per = self.bytes_per_input + 8 * (self.keys + 3 * self.pairs)
        return max(1, min(16384, (1 << 25) // per))

    def _hash(self, T: np.ndarray) -> np.ndarray:
        """One uint64 per input from the seed and its answer vector."""
        h = np.full(T.shape[0], np.uint64(self.seed) ^ np.uint64(0x9E3779B97F4A7C15))
        with np.errstate(over="ignore"):
            for i in range(T.shape[1]):
                h = _mix(h + T[:, i].astype(np.uint64) + np.uint64(i + 1))
        return h

    def tokens(self, T: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """Packed tokens (B, q + pairs, 1) of the inputs with answer vectors ``T``."""
        T = np.asarray(T)
        B, q, D = T.shape[0], self.q, self.pairs
        out = np.empty((B, self.n_tokens, 1), np.uint64) if out is None else out[:B]
        kb = np.uint64(self.key_bits)
        h = self._hash(T)
        keys = np.empty((B, D), dtype=np.uint64)
        vals = np.empty((B, D), dtype=np.uint64)
        keys[:, :q] = self.query_keys
        vals[:, :q] = T
        extra = D - q
        with np.errstate(over="ignore"):
            if extra:
                cand = np.arange(self.other_keys.size, dtype=np.uint64)
                score = _mix(h[:, None] ^ (cand[None, :] * np.uint64(0xD1B54A32D192ED03)))
                pick = np.argsort(score, axis=1, kind="stable")[:, :extra]
                keys[:, q:] = self.other_keys[pick]
                slot = np.arange(extra, dtype=np.uint64) + np.uint64(1 << 40)
                vals[:, q:] = _mix(h[:, None] + slot[None, :]) % np.uint64(self.s + 1)
            if self.shuffle:
                slot = np.arange(D, dtype=np.uint64) + np.uint64(1 << 50)
                order = np.argsort(_mix(h[:, None] ^ slot[None, :]), axis=1, kind="stable")
                keys = np.take_along_axis(keys, order, axis=1)
                vals = np.take_along_axis(vals, order, axis=1)
        out[:, :q, 0] = self.query_keys
        out[:, q:, 0] = keys | (vals << kb)
        return out

    def reference_answers(self, tokens: np.ndarray) -> np.ndarray:
        """For each query, the value of the data pair whose key equals the query's key."""
        kmask = (1 << self.key_bits) - 1
        B = tokens.shape[0]
        out = np.full((B, self.q), -1, dtype=np.int64)
        for b in range(B):
            table = {}
            for j in range(self.q, self.n_tokens):
                w = int(tokens[b, j, 0])
                table[w & kmask] = w >> self.key_bits
            for i in range(self.q):
                out[b, i] = table.get(int(tokens[b, i, 0]) & kmask, -1)
        return out


def _build(q, s, seed, params):
    return MQARFamily(q, s, seed, params["keys"], params["pairs"], params["shuffle"])


MQAR = FamilyType(
    "mqar",
    "multi-query associative recall (zoology): q fixed query keys, values in 0..s",
    _build,
    params=(
        Param("keys", "int", 0, "key vocabulary size (0: pairs)", minimum=0, maximum=MQAR_MAX_KEYS),
        Param(
            "pairs",
            "int",
            0,
            "key/value data tokens (0: q); extra pairs are distractors",
            minimum=0,
            maximum=MQAR_MAX_KEYS,
        ),
        Param("shuffle", "bool", True, "seeded order of the pairs per input"),
    ),
    default_protocols=("kv-sum", "kv-sum:drop=1"),
)
