"""Witness families too large for token arrays: packed keys, built and certified in blocks.

The families ``sketchsim bound`` reports at m = 24..32 hold 2 x 10^7 to 9 x 10^7
inputs: 2 to 8 GB as ``(F, 3, m)`` bytes, and several times that in the Python
list :func:`~sketchsim.certify.witness.build_witness` builds, so they are over
:data:`~sketchsim.certify.witness.WITNESS_MAX_INPUTS`.  Here every token is one
integer key (:func:`~sketchsim.minip.token_ids.packed_keys`: element 0 is the
most significant bit, so key order is byte order), 24 bytes an input in memory
and 12 in a file at ``m <= 32``:

- :func:`build_packed_witness` builds the witness family of ``build_witness``
  (for each query the same inputs in the same order) with NumPy, one query at a
  time.  Only the order in which a chain token gains the elements of
  ``c' \\ c`` is drawn differently; every order crosses the gap in the same
  steps (THEORY section 4, Lemma 3).
- :func:`save_packed_family` / :func:`load_packed_family` write and read an
  ``.npz`` that holds ``keys`` instead of ``tokens``.
- :func:`certify_packed` is :func:`~sketchsim.certify.certificate.certify` run
  on blocks of whole queries, straight from the keys
  (:func:`~sketchsim.certify.certificate.graph_of_keys`): a query's domination
  graph depends only on the inputs where it is scored (THEORY section 4), so
  the blocks' graphs are the pieces of the family's graph and the certificate
  equals ``certify`` on the unpacked family (tested), in memory for one block.
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import sketchsim
from sketchsim.certify import certificate as cert_mod
from sketchsim.certify.certificate import (
    DEFAULT_EPS,
    Certificate,
    certificate_of,
    chain_dp,
    graph_of_keys,
    select_pairs,
)
from sketchsim.certify.chains import LIMIT, best_steps
from sketchsim.certify.witness import Family, check_array_sizes, choose_words, load_family
from sketchsim.errors import FamilyError
from sketchsim.minip.token_ids import PACKED_MAX_M, packed_keys

__all__ = [
    "PACKED_MAX_INPUTS",
    "PackedFamily",
    "pack_family",
    "unpack_keys",
    "witness_input_count",
    "subset_words",
    "build_packed_witness",
    "save_packed_family",
    "load_packed_family",
    "is_packed_file",
    "load_any_family",
    "certify_packed",
]

#: Largest packed family built or read (inputs): 2.4 GB of uint64 keys in memory.
PACKED_MAX_INPUTS = 10**8
#: Inputs per block while certifying, and per chunk unpacked while hashing.
BLOCK_INPUTS = 1 << 21
#: Largest (queries in a block) x (pairs) lookup table while certifying.
BLOCK_LOOKUPS = 1 << 23


@dataclass
class PackedFamily:
    """A length-3 family as integer keys ``(F, 3)``, one per token, scored at ``position``."""

    keys: np.ndarray
    m: int
    position: int
    meta: dict

    @property
    def inputs(self) -> int:
        """Number of inputs ``F``."""
        return int(len(self.keys))

    def tokens(self, start: int = 0, stop: int | None = None) -> np.ndarray:
        """The 0/1 tokens ``(stop - start, 3, m)`` of inputs ``start:stop``."""
        return unpack_keys(self.keys[start:stop], self.m)

    def targets(self) -> np.ndarray:
        """Min-IP targets ``min_j <x_p, x_j>`` at the scored position (popcounts of keys)."""
        p = self.position - 1
        x = self.keys[:, p]
        return np.min([np.bitwise_count(x & self.keys[:, j]) for j in range(3)], axis=0)

    def unpack(self) -> Family:
        """The same family with token arrays (only for families that fit in memory)."""
        tokens = self.tokens()
        return Family(tokens, self.position, self.targets().astype(np.int64), dict(self.meta))

    def sha256(self) -> str:
        """:meth:`Family.sha256` of the unpacked family, computed a block at a time."""
        h = hashlib.sha256()
        for start in range(0, self.inputs, BLOCK_INPUTS):
            h.update(np.ascontiguousarray(self.tokens(start, start + BLOCK_INPUTS)).tobytes())
        h.update(str(self.position).encode())
        return h.hexdigest()


def unpack_keys(keys: np.ndarray, m: int) -> np.ndarray:
    """0/1 tokens of integer keys, the inverse of ``packed_keys``.

    Parameters
    ----------
    keys : numpy.ndarray of unsigned integers
        Keys below ``2^m``; element 0 is the most significant bit.
    m : int
        Token width, ``1 <= m <= 64``.

    Returns
    -------
    numpy.ndarray of uint8, shape ``keys.shape + (m,)``
    """
    keys = np.ascontiguousarray(keys, dtype=">u8")  # big-endian: bytes in bit order
    bits = np.unpackbits(keys.view(np.uint8).reshape(*keys.shape, 8), axis=-1)
    return np.ascontiguousarray(bits[..., 64 - m :])


def pack_family(family: Family) -> PackedFamily:
    """The packed form of a family.

    Parameters
    ----------
    family : Family
        A length-3 family with ``m <= 64``.

    Returns
    -------
    PackedFamily
        The same inputs in the same order; ``unpack()`` gives the family back.
    """
    if not 1 <= family.m <= PACKED_MAX_M:
        raise FamilyError(f"packed families need 1 <= m <= {PACKED_MAX_M}, got m = {family.m}")
    keys = packed_keys(np.ascontiguousarray(family.tokens, dtype=np.uint8))
    return PackedFamily(keys, family.m, family.position, dict(family.meta))


# ----------------------------------------------------------------------------- building


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


def save_packed_family(family: PackedFamily, path: str | Path) -> Path:
    """Write a packed family to ``path``, atomically.

    The ``.npz`` holds ``keys`` (uint32 when ``m <= 32``, else uint64), ``m``,
    ``position``, ``targets`` (uint8) and ``meta`` (JSON).

    Parameters
    ----------
    family : PackedFamily
    path : path-like

    Returns
    -------
    pathlib.Path
    """
    from sketchsim.results import atomic_path

    arrays = {
        "keys": family.keys.astype(np.uint32 if family.m <= 32 else np.uint64),
        "m": np.int64(family.m),
        "position": np.int64(family.position),
        "targets": family.targets().astype(np.uint8),
        "meta": np.array(json.dumps(family.meta)),
    }
    with atomic_path(path, suffix=".npz") as tmp:
        # np.savez_compressed's archive at deflate level 1: 3-4x faster on 10^8 keys
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
            for name, value in arrays.items():
                with archive.open(f"{name}.npy", "w", force_zip64=True) as fh:
                    np.lib.format.write_array(fh, value, allow_pickle=False)
    return Path(path)


def is_packed_file(path: str | Path) -> bool:
    """Whether ``path`` is an ``.npz`` holding packed ``keys`` (not ``tokens``)."""
    try:
        with zipfile.ZipFile(path) as archive:
            names = set(archive.namelist())
    except (OSError, zipfile.BadZipFile):
        return False
    return "keys.npy" in names and "tokens.npy" not in names


def _scalar_int(value, what: str, path: Path) -> int:
    if value.shape != () or not np.issubdtype(value.dtype, np.integer):
        raise FamilyError(f"{path}: {what} must be an integer, got {value!s} (dtype {value.dtype})")
    return int(value)


def load_packed_family(path: str | Path) -> PackedFamily:
    """Read and validate a packed family file.

    Parameters
    ----------
    path : path-like

    Returns
    -------
    PackedFamily

    Raises
    ------
    FamilyError
        For any defect (one line): sizes, dtypes, keys beyond ``m`` bits,
        targets that are not the Min-IP targets, metadata.
    """
    path = Path(path)
    if not path.is_file():
        raise FamilyError(f"family file {path} does not exist")
    check_array_sizes(path)
    try:
        with np.load(path, allow_pickle=False) as data:
            missing = {"keys", "m", "position", "targets", "meta"} - set(data.files)
            if missing:
                raise FamilyError(f"{path}: missing arrays {', '.join(sorted(missing))}")
            keys, m, position = data["keys"], data["m"], data["position"]
            targets, meta_text = data["targets"], str(data["meta"])
    except FamilyError:
        raise
    except Exception as exc:
        raise FamilyError(f"{path} is not a family file: {type(exc).__name__}: {exc}") from None
    m = _scalar_int(m, "m", path)
    position = _scalar_int(position, "position", path)
    if not 1 <= m <= PACKED_MAX_M or position not in (1, 2, 3):
        raise FamilyError(f"{path}: need 1 <= m <= {PACKED_MAX_M} and position 1-3")
    if keys.ndim != 2 or keys.shape[1] != 3 or keys.dtype.kind != "u" or len(keys) == 0:
        raise FamilyError(f"{path}: keys must be unsigned integers of shape (F >= 1, 3)")
    if len(keys) > PACKED_MAX_INPUTS:
        raise FamilyError(f"{path}: {len(keys):,} inputs, over the limit {PACKED_MAX_INPUTS:,}")
    keys = keys.astype(np.uint64)
    if m < 64 and int(keys.max()) >> m:
        raise FamilyError(f"{path}: a key has bits beyond the m = {m} elements")
    try:
        meta = json.loads(meta_text)
    except (ValueError, RecursionError):
        raise FamilyError(f"{path}: metadata is not JSON") from None
    if not isinstance(meta, dict):
        raise FamilyError(f"{path}: metadata must be a JSON object, got {type(meta).__name__}")
    family = PackedFamily(keys, m, position, meta)
    if targets.shape != (len(keys),) or not np.array_equal(targets, family.targets()):
        raise FamilyError(f"{path}: targets do not match min_j <x_p, x_j> at position {position}")
    return family


def load_any_family(path: str | Path) -> Family | PackedFamily:
    """A family file of either kind: :class:`PackedFamily` for packed keys, else :class:`Family`."""
    return load_packed_family(path) if is_packed_file(path) else load_family(path)


# ----------------------------------------------------------------------------- certificate


def _query_runs(q: np.ndarray) -> tuple[np.ndarray | None, np.ndarray]:
    """An order grouping equal queries (None: already grouped) and the start of each group."""
    change = np.flatnonzero(q[1:] != q[:-1]) + 1
    starts = np.concatenate([[0], change, [len(q)]])
    order = None
    run_queries = q[starts[:-1]]
    if len(run_queries) != len(np.unique(run_queries)):  # some query comes back later
        order = np.argsort(q, kind="stable")
        sq = q[order]
        starts = np.concatenate([[0], np.flatnonzero(sq[1:] != sq[:-1]) + 1, [len(q)]])
    return order, starts


def _diagonals(keys: np.ndarray, p: int, o1: int, o2: int) -> tuple[np.ndarray, np.ndarray]:
    """Each query's diagonal token, as ``build_graph`` picks it: the least-overlap self input.

    Ties go to the lowest key (``build_graph``'s lowest token id).  Returns the
    query keys (ascending) and their diagonal keys.
    """
    self_in = keys[:, o1] == keys[:, o2]
    q, t = keys[self_in, p], keys[self_in, o1]
    by = np.lexsort((t, np.bitwise_count(q & t), q))
    q, t = q[by], t[by]
    first = np.ones(len(q), dtype=bool)
    first[1:] = q[1:] != q[:-1]
    return q[first], t[first]


def _blocks(starts: np.ndarray, pairs: int, block_inputs: int):
    """``(first row, end row)`` of consecutive groups, each block within the size limits."""
    lo = 0
    while lo < len(starts) - 1:
        hi = lo + 1
        while (
            hi < len(starts) - 1
            and starts[hi + 1] - starts[lo] <= block_inputs
            and (hi + 1 - lo) * max(pairs, 1) <= BLOCK_LOOKUPS
        ):
            hi += 1
        yield int(starts[lo]), int(starts[hi])
        lo = hi


class _Rows:
    """Chain bounds ``P`` of every query against every pair's token, gathered block by block."""

    def __init__(self, n: int, eps_all, dense: bool):
        self.n, self.dense = n, dense
        self.P = {e: np.full((n, n), np.inf) for e in eps_all} if dense else None
        self.entries = {e: [] for e in eps_all}

    def add(self, eps: float, rows: np.ndarray, vals: np.ndarray) -> None:
        if self.dense:
            self.P[eps][rows] = vals
            return
        r, c = np.nonzero(np.isfinite(vals))
        self.entries[eps].append((rows[r], c, vals[r, c]))

    def choose(self, eps: float, diag_token: np.ndarray):
        """``(keep, P[keep, keep], how)`` as ``certify`` chooses them."""
        if self.dense:
            P = self.P[eps]
            P[diag_token[:, None] == diag_token[None, :]] = np.inf  # same token twice: entry 1
            np.fill_diagonal(P, 0.0)
            return select_pairs(self.n, eps, P=P)
        parts = self.entries[eps]
        rows, cols, vals = (np.concatenate([p[i] for p in parts]) for i in range(3))
        keep = diag_token[rows] != diag_token[cols]
        return select_pairs(self.n, eps, entries=(rows[keep], cols[keep], vals[keep]))


def _block_graph(family: PackedFamily, keys: np.ndarray, positional: bool):
    """The domination graphs of one block and its sorted distinct keys (its token ids)."""
    graph = graph_of_keys(keys, family.m, family.position, positional)
    return graph, np.unique(keys)


def certify_packed(
    family: PackedFamily,
    eps_list=DEFAULT_EPS,
    positional: bool = True,
    block_inputs: int = BLOCK_INPUTS,
) -> Certificate:
    """:func:`~sketchsim.certify.certificate.certify` on a packed family, block by block.

    Parameters
    ----------
    family : PackedFamily
    eps_list : sequence of float
        Error levels ``0 < eps < 1/2`` (the limit 1/2 is always included).
    positional : bool
        Require both orders of a mixed input.
    block_inputs : int
        Inputs unpacked at once (a query with more inputs is one block).

    Returns
    -------
    Certificate
        Equal to ``certify(family.unpack(), eps_list, positional)``.
    """
    p = family.position - 1
    o1, o2 = (i for i in range(3) if i != p)
    keys = family.keys
    diag_query, diag_token = _diagonals(keys, p, o1, o2)
    n = len(diag_query)
    eps_all = (LIMIT, *eps_list)
    gathered = _Rows(n, eps_all, dense=n <= cert_mod.DENSE_MAX_PAIRS)
    order, starts = _query_runs(keys[:, p])
    edges = 0
    for lo, hi in _blocks(starts, n, block_inputs):
        rows_idx = slice(lo, hi) if order is None else order[lo:hi]
        graph, uniq = _block_graph(family, keys[rows_idx], positional)
        edges += len(graph.edge_src)
        bq = uniq[graph.node_query[graph.diag]]
        rows = np.searchsorted(diag_query, bq)
        if not np.array_equal(uniq[graph.node_token[graph.diag]], diag_token[rows]):
            raise AssertionError("a block's diagonal differs from the family's")  # a bug
        col = np.minimum(np.searchsorted(uniq, diag_token), len(uniq) - 1)
        present = uniq[col] == diag_token
        node, found = graph.find(graph.node_query[graph.diag][:, None], col[None, :])
        found &= present[None, :]
        for eps in eps_all:
            dist = chain_dp(graph, eps)
            logp = np.where(found, dist[node], np.inf)
            # only P <= 1 bounds (certificate.pair_matrix)
            vals = np.where(logp <= 1e-12, np.exp(np.minimum(logp, 0.0)), np.inf)
            gathered.add(eps, rows, vals)
    return certificate_of(
        [(eps, *gathered.choose(eps, diag_token)) for eps in eps_all],
        inputs=family.inputs,
        m=family.m,
        family_sha256=family.sha256(),
        positional=positional,
        queries=n,
        edges=int(edges),
    )
