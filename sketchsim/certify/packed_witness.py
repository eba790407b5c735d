"""The packed witness family built with NumPy, one query at a time (THEORY section 4).

:func:`build_packed_witness` builds the witness family of
:func:`~sketchsim.certify.witness.build_witness` (for each query the same inputs in the
same order) as integer token keys (:mod:`sketchsim.certify.packed`).  Only the order in
which a chain token gains the elements of ``c' \\ c`` is drawn differently; every order
crosses the gap in the same steps (Lemma 3).
"""

from __future__ import annotations

import numpy as np

import sketchsim
from sketchsim.certify.chains import best_steps
from sketchsim.certify.packed import PACKED_MAX_INPUTS, PackedFamily
from sketchsim.certify.witness import choose_words
from sketchsim.errors import FamilyError
from sketchsim.minip.token_ids import PACKED_MAX_M, packed_keys

__all__ = ["witness_input_count", "subset_words", "build_packed_witness"]


def _step_table(m: int, chains: bool) -> tuple[np.ndarray, np.ndarray]:
    """Per gap ``g = 0..m``: chain steps ``K[g]`` and elements gained after each step.

    ``taken[g, k - 1]`` is the overlap of the k-th chain token with the query (the
    first ``k`` steps of :func:`~sketchsim.certify.chains.best_steps`, as
    ``build_witness`` takes them); without chains every gap is one step.
    """
    steps = [(best_steps(g) or (g,)) if chains else (g,) for g in range(m + 1)]
    K = np.array([len(s) for s in steps], dtype=np.int64)
    taken = np.zeros((m + 1, max(int(K.max()) - 1, 1)), dtype=np.int64)
    for g, s in enumerate(steps):
        taken[g, : len(s) - 1] = np.cumsum(s[:-1])
    return K, taken


#: Rows of the gap matrix formed at once (memory ``GAP_ROWS x n``).
GAP_ROWS = 1024


def _gaps(code: np.ndarray, rows: slice) -> np.ndarray:
    """``gaps[c, c'] = |c' \\ c|`` (the overlap of ``x_c`` with ``c'``) for ``c`` in ``rows``."""
    code = np.asarray(code, dtype=np.float32)
    # exact in float32 for m < 2^24
    return np.rint((1 - code[rows]) @ code.T).astype(np.int64)


def witness_input_count(code: np.ndarray, chains: bool, both_orders: bool = True) -> int:
    """Inputs of the witness family of ``code`` before duplicates are removed (an upper bound).

    Per query ``x_c``: ``(x_c, u, u)`` for every word and every intermediate
    chain token, and one (two with both orders) mixed input per chain step.

    Parameters
    ----------
    code : numpy.ndarray, shape (n, m)
        0/1 words (every word is a query).
    chains : bool
        Chains as ``build_witness(chains=True)`` builds them.
    both_orders : bool
        Both orders of each mixed input.

    Returns
    -------
    int
    """
    code = np.asarray(code, dtype=np.uint8)
    n, m = code.shape
    K, _ = _step_table(m, chains)
    total = n * n
    for lo in range(0, n, GAP_ROWS):
        steps = K[_gaps(code, slice(lo, lo + GAP_ROWS))]
        steps[np.arange(len(steps)), np.arange(lo, lo + len(steps))] = 1  # c' = c: no chain
        total += int((steps - 1).sum() + (2 if both_orders else 1) * (steps.sum() - len(steps)))
    return total


def _first_occurrences(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Indices of the first occurrence of each distinct ``(a, b)`` pair, in input order."""
    order = np.lexsort((b, a))
    sa, sb = a[order], b[order]
    first = np.ones(len(order), dtype=bool)
    first[1:] = (sa[1:] != sa[:-1]) | (sb[1:] != sb[:-1])
    return np.sort(order[first])


def _chain_tokens(c, others, K, taken, m, rng) -> np.ndarray:
    """Chain tokens ``u_0 = c, ..., u_kmax`` to each other word ``c'`` (``u_k = c'`` for k >= K).

    ``u_k = (c' & c) | (the first taken[k] elements of c' \\ c in a random order)``,
    as ``build_witness``'s chains (THEORY section 4, Lemma 3).
    """
    kmax = int(K.max()) if len(K) else 1
    path = np.empty((len(others), kmax + 1), dtype=np.uint64)
    path[:, 0] = c
    path[:, 1:] = others[:, None]
    if kmax == 1:
        return path
    weights = np.uint64(1) << np.arange(m, dtype=np.uint64)
    inside = (others[:, None] & ~c & weights) != 0  # the elements of c' \ c
    priority = np.where(inside, rng.random(inside.shape), 2.0)
    rank = np.empty_like(inside, dtype=np.int64)
    rows = np.arange(len(others))[:, None]
    rank[rows, np.argsort(priority, axis=1)] = np.arange(m)
    base = others & c
    for k in range(1, kmax):
        gained = inside & (rank < taken[:, k - 1][:, None])
        token = base | np.bitwise_or.reduce(np.where(gained, weights, np.uint64(0)), axis=1)
        path[:, k] = np.where(k < K, token, others)
    return path


def _query_inputs(c, others, K, taken, m, rng, both_orders: bool) -> np.ndarray:
    """The inputs ``(x_c, u, u')`` of one query as key triples, in ``build_witness``'s order."""
    path = _chain_tokens(c, others, K, taken, m, rng)
    kmax = path.shape[1] - 1
    k = np.arange(kmax + 1)
    inner = path[(k[None, :] >= 1) & (k[None, :] < K[:, None])]  # word-major, step-minor
    singles = np.concatenate([np.array([c], dtype=np.uint64), others, inner])
    step = k[None, 1:] <= K[:, None]
    lo, hi = path[:, :-1][step], path[:, 1:][step]
    if both_orders:
        a = np.stack([lo, hi], axis=1).reshape(-1)
        b = np.stack([hi, lo], axis=1).reshape(-1)
    else:
        a, b = lo, hi
    a = np.concatenate([singles, a])
    b = np.concatenate([singles, b])
    keep = _first_occurrences(a, b)
    full = np.uint64((1 << m) - 1)
    x = np.full(len(keep), ~c & full, dtype=np.uint64)
    return np.stack([x, a[keep], b[keep]], axis=1)


def subset_words(code: np.ndarray, codewords: int | None, seed: int = 0) -> np.ndarray:
    """The words ``build_witness(code, codewords=codewords, seed=seed)`` uses, in code order.

    Parameters
    ----------
    code : numpy.ndarray, shape (K, m)
    codewords : int or None
        Number of words (None or ``>= K``: all).
    seed : int
        Seed of the choice.

    Returns
    -------
    numpy.ndarray of uint8
    """
    return choose_words(np.asarray(code, dtype=np.uint8), codewords, np.random.default_rng(seed))


def build_packed_witness(
    code: np.ndarray,
    kind: str = "code",
    chains: bool = True,
    both_orders: bool = True,
    seed: int = 0,
) -> PackedFamily:
    """The witness family of every word of ``code`` (complement queries), as packed keys.

    Parameters
    ----------
    code : numpy.ndarray, shape (n, m)
        Distinct 0/1 words, ``m <= 64``.
    kind : str
        Recorded in the metadata.
    chains : bool
        Cross each gap in the steps of :func:`~sketchsim.certify.chains.best_steps`.
    both_orders : bool
        Add ``(x_c, u', u)`` beside ``(x_c, u, u')``.
    seed : int
        Seeds the order in which chain tokens gain elements.

    Returns
    -------
    PackedFamily
        Position 1 scored; queries in the order of ``code``, and for each query its
        inputs in the order ``build_witness`` gives them.
    """
    code = np.asarray(code, dtype=np.uint8)
    if code.ndim != 2 or len(code) < 1 or not 1 <= code.shape[1] <= PACKED_MAX_M:
        raise FamilyError(
            f"a code of shape (n >= 1, 1 <= m <= {PACKED_MAX_M}) is needed, got {code.shape}"
        )
    n, m = code.shape
    words = packed_keys(code)
    if len(np.unique(words)) != n:
        raise FamilyError("the code has repeated words (each word is one query)")
    # every query has its n self inputs: n^2 alone may be over the limit
    total = n * n if n * n > PACKED_MAX_INPUTS else witness_input_count(code, chains, both_orders)
    if total > PACKED_MAX_INPUTS:
        raise FamilyError(
            f"a witness family of {n:,} words (m = {m}) holds up to {total:,} inputs, over the "
            f"limit {PACKED_MAX_INPUTS:,} of a packed family (24 bytes an input in memory)",
            param="codewords",
        )
    K_of, taken_of = _step_table(m, chains)
    rng = np.random.default_rng(seed)
    keys = np.empty((total, 3), dtype=np.uint64)
    filled = 0
    for i in range(n):
        if i % GAP_ROWS == 0:
            gaps = _gaps(code, slice(i, i + GAP_ROWS))
        others = np.delete(np.arange(n), i)
        g = gaps[i % GAP_ROWS, others]
        block = _query_inputs(words[i], words[others], K_of[g], taken_of[g], m, rng, both_orders)
        keys[filled : filled + len(block)] = block
        filled += len(block)
    meta = {
        "m": int(m),
        "code": kind,
        "codewords": int(n),
        "chains": chains,
        "both_orders": both_orders,
        "seed": seed,
        "packed": True,
        "version": sketchsim.__version__,
    }
    return PackedFamily(keys[:filled].copy(), int(m), 1, meta)


# ----------------------------------------------------------------------------- files
