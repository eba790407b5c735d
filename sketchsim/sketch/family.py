"""Input families: fixed query tokens, varying data tokens, answers at the queries.

A :class:`Family` fixes ``q`` query tokens (positions ``0..q-1``) and draws the
data tokens (positions ``q..``); the answer at query ``i`` lies in ``0..s``.
Every input is identified by its answer vector ``t`` (row of ``T``); the data
tokens are a deterministic function of ``t`` and the family's seed, so the
input distribution is the uniform distribution over answer vectors and the
bound of THEORY section 5 is the entropy of that vector, ``q log2(s+1)``.
Families are plug-ins (:class:`FamilyType`, see :mod:`sketchsim.sketch.family_plugins`).

:class:`HardFamily` is the hard Min-IP family F(q, s) of THEORY section 5:
``m = q*s + s + 1``: ``q`` blocks of ``s`` bits, then a pad of ``s + 1`` bits.
Query ``i`` is ``block_i OR pad``; the data token (position ``q``) has ``t_i``
ones inside block ``i`` (which ones: a seeded permutation per block) and none
in the pad.  The answer at query ``i`` is ``t_i``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from numba import njit, prange

from sketchsim.errors import FamilyError
from sketchsim.minip.bits import n_words, pack_bits, unpack_bits
from sketchsim.sketch.protocol import Context, Param, resolve_params

__all__ = [
    "Family",
    "FamilyType",
    "HardFamily",
    "HARD",
    "MAX_BYTES_PER_INPUT",
    "answer_dtype",
    "check_variable_tokens",
]

MAX_BYTES_PER_INPUT = 1 << 26


def answer_dtype(s: int):
    """The smallest unsigned dtype holding answers ``0..s``."""
    for dt in (np.uint8, np.uint16, np.uint32):
        if s <= np.iinfo(dt).max:
            return dt
    return np.int64


class Family:
    """Base class of input families (subclasses set ``name``, ``q``, ``s``, ``seed``).

    Subclasses define ``m``, ``n_tokens``, :meth:`tokens` and
    :meth:`reference_answers`; the rest is shared.
    """

    name = "family"
    q: int
    s: int
    seed: int
    #: :meth:`variable_tokens` may run on several threads at once (no numba
    #: ``parallel`` kernel inside); otherwise callers take turns.
    tokens_thread_safe = False

    @property
    def m(self) -> int:  # pragma: no cover - abstract
        raise NotImplementedError

    @property
    def n_tokens(self) -> int:  # pragma: no cover - abstract
        raise NotImplementedError

    @property
    def words(self) -> int:
        return n_words(self.m)

    @property
    def bytes_per_input(self) -> int:
        return self.n_tokens * self.words * 8

    @property
    def bound_bits(self) -> float:
        """Entropy of the answer vector: ``q log2(s + 1)`` for uniform answers."""
        return self.q * math.log2(self.s + 1)

    @property
    def size(self) -> int:
        """``(s+1)^q`` answer vectors (an exact Python int; may be astronomically large)."""
        return (self.s + 1) ** self.q

    @property
    def log2_size(self) -> float:
        return self.q * math.log2(self.s + 1)

    @property
    def answer_dtype(self):
        return answer_dtype(self.s)

    def size_text(self) -> str:
        """``size`` for messages, without converting huge ints to float."""
        if self.log2_size < 40:
            return f"{self.size:,}"
        return f"2^{self.log2_size:.1f}"

    def context(self) -> Context:
        return Context(self.q, self.s, self.m, self.n_tokens)

    def describe(self) -> str:
        """One line for the terminal."""
        return f"{self.name}(q={self.q}, s={self.s})"

    def options(self) -> dict:
        """The family's parameters (recorded in result files)."""
        return {}

    def all_answers(self) -> np.ndarray:
        """Every answer vector, shape ((s+1)^q, q), in mixed-radix order.

        Built one column at a time in the answer dtype: no (B, q) int64 temporaries.
        """
        B = self.size
        idx = np.arange(B, dtype=np.int64)
        out = np.empty((B, self.q), dtype=self.answer_dtype)
        base = self.s + 1
        power = 1
        for col in range(self.q - 1, -1, -1):
            out[:, col] = (idx // power) % base
            power *= base
        return out

    def answers_range(self, lo: int, hi: int) -> np.ndarray:
        """Rows ``lo .. hi-1`` of :meth:`all_answers` (mixed-radix order), built alone."""
        dt = np.uint32 if hi <= 1 << 32 else np.int64  # 32-bit division is faster
        rem = np.arange(lo, hi, dtype=dt)
        out = np.empty((hi - lo, self.q), dtype=self.answer_dtype)
        base = dt(self.s + 1)
        for col in range(self.q - 1, -1, -1):  # the last column varies fastest
            rem, digit = np.divmod(rem, base)
            out[:, col] = digit
        return out

    def digest(self) -> str:
        """A sha256 of the tokens this family builds for a few fixed inputs.

        Part of every resume key and checked by cluster workers: a family plug-in
        changed under the same name builds other tokens, so its results are not
        mistaken for the old ones.
        """
        import hashlib

        n = int(min(8, self.size))
        T = np.concatenate([self.answers_range(0, n), np.full((1, self.q), self.s)])
        T = T.astype(self.answer_dtype)
        fixed = np.ascontiguousarray(self.fixed_tokens(), dtype=np.uint64)
        # checked as a run checks them: a plug-in's bad tokens are one FamilyError line
        var = check_variable_tokens(self, self.variable_tokens(T), T.shape[0])
        h = hashlib.sha256(repr((fixed.shape, var.shape, str(var.dtype))).encode())
        h.update(fixed.tobytes())
        h.update(var.tobytes())
        return h.hexdigest()

    def sample_answers(self, k: int) -> np.ndarray:
        """``k`` answer vectors drawn uniformly with the family's seed."""
        if k < 1:
            raise FamilyError(f"the number of samples must be >= 1, got {k}")
        rng = np.random.default_rng([self.seed, 1])
        return rng.integers(0, self.s + 1, size=(k, self.q), dtype=self.answer_dtype)

    def tokens(self, T: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """Packed tokens (B, n_tokens, words) of the inputs with answer vectors ``T``."""
        raise NotImplementedError  # pragma: no cover - abstract

    @property
    def n_fixed(self) -> int:
        """Leading tokens (positions ``0..n_fixed-1``) that are the same in every input."""
        return 0

    def fixed_tokens(self) -> np.ndarray:
        """The tokens every input shares, packed: shape (n_fixed, words)."""
        if self.n_fixed == 0:
            return np.zeros((0, self.words), dtype=np.uint64)
        return self.tokens(self.sample_answers(1))[0, : self.n_fixed].copy()

    def variable_tokens(self, T: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """Packed tokens ``n_fixed..`` of the inputs ``T``: (B, n_tokens - n_fixed, words).

        With :meth:`fixed_tokens` in front, the same inputs as :meth:`tokens`;
        the engine runs on the two without building the shared ones per input.
        ``out``, when given, is a buffer with at least ``B`` rows that is reused.
        """
        if self.n_fixed == 0:
            return self.tokens(T, out=out)
        rest = self.tokens(T)[:, self.n_fixed :]
        if out is None:
            return np.ascontiguousarray(rest)
        out = out[: rest.shape[0]]
        out[...] = rest
        return out

    def reference_answers(self, tokens: np.ndarray) -> np.ndarray:
        """The answers (B, q) computed from the tokens alone, by the family's definition.

        Plain NumPy; the tests use it to check :meth:`tokens` and the bound.
        """
        raise NotImplementedError  # pragma: no cover - abstract

    def chunk_size(self) -> int:
        """Inputs per engine chunk: about 32 MiB of tokens."""
        return max(1, min(16384, (1 << 25) // self.bytes_per_input))


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


#: :meth:`HardFamily.tokens` of at most this many inputs runs serially: the few inputs
#: of a family's digest or a collision check do not start numba's thread pool.
_SERIAL_TOKENS = 1 << 12

#: Largest table of per-block prefix masks (bytes) :class:`HardFamily` precomputes.
_MASK_TABLE_BYTES = 1 << 22


@njit(nogil=True, cache=True)
def _build_data_masked(T, masks, first_word, block_lo, block_hi, out):
    """The data token of each input from prefix masks; serial, for worker threads.

    ``masks[i, t, k]`` is word ``first_word[i] + k`` of the first ``t`` bits of
    block ``i``; word ``w`` of the token ORs the blocks ``block_lo[w]..block_hi[w]-1``.
    """
    for b in range(T.shape[0]):
        for w in range(out.shape[2]):
            acc = np.uint64(0)
            for i in range(block_lo[w], block_hi[w]):
                acc |= masks[i, T[b, i], w - first_word[i]]
            out[b, 0, w] = acc


@njit(nogil=True, cache=True)
def _build_data_tokens(T, perm, out):
    """The data token of each input (position ``q``) alone, bit by bit; serial."""
    B, q = T.shape
    for b in range(B):
        out[b, 0, :] = 0
        for i in range(q):
            for r in range(T[b, i]):
                bit = perm[i, r]
                out[b, 0, bit >> 6] |= np.uint64(1) << np.uint64(bit & 63)


@dataclass
class HardFamily(Family):
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
    _masks: tuple | None = field(init=False, repr=False, compare=False)
    name = "hard"
    tokens_thread_safe = True

    def __post_init__(self):
        if self.q < 1:
            raise FamilyError(f"q must be >= 1, got {self.q}")
        if self.s < 1:
            raise FamilyError(f"s must be >= 1, got {self.s}")
        if self.bytes_per_input > MAX_BYTES_PER_INPUT:
            raise FamilyError(
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
        self._masks = self._prefix_masks()

    def _prefix_masks(self):
        """Tables for :func:`_build_data_masked`, or None when they would be too large."""
        q, s, W = self.q, self.s, self.words
        first = (np.arange(q, dtype=np.int64) * s) >> 6
        last = ((np.arange(q, dtype=np.int64) + 1) * s - 1) >> 6
        span = int((last - first).max()) + 1
        if q * (s + 1) * span * 8 > _MASK_TABLE_BYTES:
            return None
        masks = np.zeros((q, s + 1, span), dtype=np.uint64)
        for i in range(q):
            for t in range(1, s + 1):
                bit = int(self.perm[i, t - 1])
                masks[i, t:, (bit >> 6) - first[i]] |= np.uint64(1 << (bit & 63))
        words = np.arange(W)
        block_lo = np.searchsorted(last, words, side="left").astype(np.int64)
        block_hi = np.searchsorted(first, words, side="right").astype(np.int64)
        return masks, first, block_lo, block_hi

    @property
    def m(self) -> int:
        return self.q * self.s + self.s + 1

    @property
    def n_tokens(self) -> int:
        return self.q + 1

    def describe(self) -> str:
        return f"F(q={self.q}, s={self.s})"

    def tokens(self, T: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """Packed tokens (B, q + 1, words) of the inputs with answer vectors ``T``.

        ``out``, when given, is a buffer with at least ``B`` rows that is reused.
        """
        T = np.ascontiguousarray(T, dtype=np.int64 if self.s > 255 else np.uint8)
        shape = (T.shape[0], self.n_tokens, self.words)
        out = np.empty(shape, dtype=np.uint64) if out is None else out[: T.shape[0]]
        if T.shape[0] <= _SERIAL_TOKENS:  # no parallel region: its thread pool costs start-up
            out[:, : self.q] = self.query_words
            out[:, self.q] = self.variable_tokens(T)[:, 0]
        else:
            _build_tokens(T, self.query_words, self.perm, out)
        return out

    @property
    def n_fixed(self) -> int:
        return self.q

    def fixed_tokens(self) -> np.ndarray:
        """The ``q`` query tokens, (q, words): the same in every input."""
        return self.query_words

    def variable_tokens(self, T: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """The data tokens (B, 1, words) of the inputs with answer vectors ``T``."""
        T = np.ascontiguousarray(T, dtype=np.int64 if self.s > 255 else np.uint8)
        shape = (T.shape[0], 1, self.words)
        out = np.empty(shape, dtype=np.uint64) if out is None else out[: T.shape[0]]
        if self._masks is None:
            _build_data_tokens(T, self.perm, out)
        else:
            _build_data_masked(T, *self._masks, out)
        return out

    def reference_answers(self, tokens: np.ndarray) -> np.ndarray:
        """Min-IP at each query: ``min_j <x_i, x_j>`` over all tokens (THEORY section 5)."""
        X = unpack_bits(tokens, self.m).astype(np.int64)
        ip = np.einsum("bim,bjm->bij", X[:, : self.q], X)
        return ip.min(axis=2)


@dataclass(frozen=True)
class FamilyType:
    """A family plug-in: builds a :class:`Family` from ``(q, s, seed, params)``.

    Parameters
    ----------
    name : str
    description : str
    build : callable
        ``build(q, s, seed, params) -> Family``.
    params : tuple of Param
        Typed parameters given as ``NAME:k=v,...``.
    default_protocols : tuple of str
        Protocol specs ``transcript`` runs on this family without ``--protocol``.
    """

    name: str
    description: str
    build: Callable[[int, int, int, dict], Family]
    params: tuple[Param, ...] = ()
    default_protocols: tuple[str, ...] = ()

    def defaults(self) -> dict:
        return {p.name: p.default for p in self.params}

    def resolve(self, given: dict[str, str]) -> dict:
        """Parse ``name=value`` strings against the declared parameters."""
        return resolve_params(self.params, given, f"family {self.name}", FamilyError)

    def make(self, q: int, s: int, seed: int, params: dict) -> Family:
        try:
            fam = self.build(q, s, seed, params)
        except FamilyError:
            raise
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # a plug-in bug (SystemExit too): one line naming it
            raise FamilyError(
                f"family {self.name}: build failed: {type(exc).__name__}: {exc}"
            ) from None
        if not isinstance(fam, Family):
            raise FamilyError(f"family {self.name}: build must return a sketchsim Family")
        for what in ("q", "s", "m", "n_tokens"):
            value = getattr(fam, what)
            if not isinstance(value, int | np.integer) or isinstance(value, bool) or value < 1:
                raise FamilyError(
                    f"family {self.name}: {what} must be an integer >= 1, got {value!r}"
                )
        return fam


def check_variable_tokens(family: Family, tokens, rows: int) -> np.ndarray:
    """``tokens`` when they are what :meth:`Family.variable_tokens` promises for ``rows`` inputs.

    A plug-in family's tokens go to the compiled engine unchecked otherwise: a
    wrong shape reads the wrong memory, and the report would describe inputs the
    family never defined.

    Raises
    ------
    FamilyError
        Not a uint64 array of shape ``(rows, n_tokens - n_fixed, words)``.

    Returns
    -------
    numpy.ndarray
        ``tokens``, C-contiguous (copied only when a view is strided).
    """
    name = f"family {family.name}: variable_tokens returned"
    if not isinstance(tokens, np.ndarray):
        raise FamilyError(f"{name} {type(tokens).__name__}, not a uint64 array")
    if tokens.dtype != np.uint64:
        raise FamilyError(f"{name} {tokens.dtype} tokens; packed tokens are uint64")
    want = (rows, family.n_tokens - family.n_fixed, family.words)
    if tokens.shape != want:
        raise FamilyError(f"{name} shape {tokens.shape} for {rows} inputs; expected {want}")
    # the compiled engine reads rows by offset: a strided view would be read wrong
    return np.ascontiguousarray(tokens)


HARD = FamilyType(
    "hard",
    "F(q,s): q fixed Min-IP queries, one data token with t_i ones in block i (THEORY 5)",
    lambda q, s, seed, params: HardFamily(q, s, seed),
    default_protocols=(
        "raw",
        "block-counts",
        "clipped-counts",
        "kernel",
        "kernel:bits=6",
        "kernel:values=blocks,bits=7",
        "multihead:heads=4",
    ),
)
