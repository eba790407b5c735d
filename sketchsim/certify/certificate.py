"""The rank certificate of THEORY section 4 on any length-3 family.

For each query token ``x`` (the token at the scored position) the family's
inputs define a domination graph: node ``u`` when ``(x, u, u)`` is present, an
edge ``u -> u'`` when ``<x,u> < <x,u'>`` and the mixed input(s) are present
(both orders for position-dependent maps, the default; either order for
position-independent maps, whose output is symmetric in the other two tokens).
An edge of gap ``g`` has weight ``log rho(g, eps)`` (Lemma 2), a path's weight
is the log of its chain product (Lemma 3), and the graph is a DAG ordered by
overlap, so one jitted pass in overlap order finds every best product from the
query's diagonal token (its least-overlap candidate).  Lemma 4 then gives
``r >= n^2 / (n + sum P^2)`` over a chosen set of diagonal pairs.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from fractions import Fraction

import numpy as np
from numba import njit

from sketchsim.certify.chains import LIMIT, log_rho
from sketchsim.certify.witness import WitnessFamily
from sketchsim.errors import FamilyError
from sketchsim.minip.token_ids import PACKED_MAX_M, ids_of_keys, packed_keys, token_ids

__all__ = [
    "Graph",
    "Certificate",
    "build_graph",
    "graph_of_keys",
    "chain_dp",
    "certify",
    "certificate_of",
    "rank_bound",
    "certified_rank",
    "choose_pairs",
    "choose_best_pairs",
    "select_pairs",
    "DEFAULT_EPS",
]

DEFAULT_EPS = (0.1, 0.25, 0.4, 0.49)


@dataclass
class Graph:
    """Domination graphs of all queries, as flat arrays.

    ``node_query[k]``, ``node_token[k]``, ``node_overlap[k]`` describe node ``k``
    (nodes sorted by ``node_query * base + node_token``); edges ``edge_src ->
    edge_dst`` with integer gaps, sorted by the source's overlap within each
    query; ``diag[i]`` is the diagonal node of candidate pair ``i``.
    """

    node_query: np.ndarray
    node_token: np.ndarray
    node_overlap: np.ndarray
    edge_src: np.ndarray
    edge_dst: np.ndarray
    edge_gap: np.ndarray
    diag: np.ndarray
    base: int

    def find(self, query: np.ndarray, token: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Node index of each ``(query, token)`` and whether that node exists."""
        return _find(self.node_query * self.base + self.node_token, query * self.base + token)


def _find(sorted_keys: np.ndarray, want: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Positions of ``want`` in ``sorted_keys`` and a mask of those actually present."""
    if len(sorted_keys) == 0:
        return np.zeros(want.shape, dtype=np.int64), np.zeros(want.shape, dtype=bool)
    pos = np.minimum(np.searchsorted(sorted_keys, want), len(sorted_keys) - 1)
    return pos, sorted_keys[pos] == want


def _key_ids_and_overlaps(keys: np.ndarray, m: int, p: int, o1: int, o2: int):
    """Token ids (sorted key order) and the overlaps of the scored token with the others."""
    ids, count = ids_of_keys(keys, m)
    ov_a = np.bitwise_count(keys[:, p] & keys[:, o1]).astype(np.int64)
    ov_b = np.bitwise_count(keys[:, p] & keys[:, o2]).astype(np.int64)
    return ids.astype(np.int64), max(count, 1), ov_a, ov_b


def build_graph(family: WitnessFamily, positional: bool = True) -> Graph:
    """Build the domination graphs of a length-3 family.

    Tokens become packed integer keys (``m <= 64``): ids come from a lookup table
    (or one sort) and overlaps from popcounts, with no int64 copy of the tokens.
    """
    p = family.position - 1
    o1, o2 = (i for i in range(3) if i != p)
    if family.m <= PACKED_MAX_M and len(family.tokens):
        return graph_of_keys(packed_keys(family.tokens), family.m, family.position, positional)
    ids, count = token_ids(family.tokens)
    T = family.tokens
    ov_a = np.einsum("fk,fk->f", T[:, p], T[:, o1], dtype=np.int64)
    ov_b = np.einsum("fk,fk->f", T[:, p], T[:, o2], dtype=np.int64)
    return _graph(ids, max(count, 1), ov_a, ov_b, family.position, positional)


def graph_of_keys(keys: np.ndarray, m: int, position: int, positional: bool = True) -> Graph:
    """:func:`build_graph` of a family given as packed keys (``m <= 64``).

    Parameters
    ----------
    keys : numpy.ndarray of uint64, shape (F, 3)
        :func:`~sketchsim.minip.token_ids.packed_keys` of the family's tokens.
    m : int
        Token width.
    position : int
        The scored position, 1-3.
    positional : bool
        Require both orders of a mixed input.

    Returns
    -------
    Graph
        Token ids are the ranks of the keys among the distinct keys present.
    """
    p = position - 1
    o1, o2 = (i for i in range(3) if i != p)
    ids, U, ov_a, ov_b = _key_ids_and_overlaps(keys, m, p, o1, o2)
    return _graph(ids, U, ov_a, ov_b, position, positional)


def _graph(ids, U, ov_a, ov_b, position: int, positional: bool) -> Graph:
    """The domination graphs from token ids ``(F, 3)`` and the scored token's overlaps."""
    p = position - 1
    o1, o2 = (i for i in range(3) if i != p)
    q, a, b = ids[:, p], ids[:, o1], ids[:, o2]
    if U**3 >= 2**63:
        raise FamilyError(
            f"family has {U:,} distinct tokens; pair keys need U^3 < 2^63 (U <= 2,097,151)"
        )

    self_in = a == b
    node_keys, first = np.unique(q[self_in] * U + a[self_in], return_index=True)
    node_query = node_keys // U
    node_token = node_keys % U
    node_overlap = ov_a[self_in][first]

    mixed = ~self_in
    qa, ta, tb = q[mixed], a[mixed], b[mixed]
    oa, ob = ov_a[mixed], ov_b[mixed]
    keep = oa != ob  # equal overlaps constrain nothing
    qa, ta, tb, oa, ob = qa[keep], ta[keep], tb[keep], oa[keep], ob[keep]
    lo_is_a = oa < ob
    lo = np.where(lo_is_a, ta, tb)
    hi = np.where(lo_is_a, tb, ta)
    gap = np.abs(ob - oa)
    pair_keys = (qa * U + lo) * U + hi
    uniq, inv = np.unique(pair_keys, return_inverse=True)
    inv = inv.reshape(-1)
    # order 1: (x, lo, hi) present; order 2: (x, hi, lo) present
    has_lo_first = np.bincount(inv, weights=lo_is_a, minlength=len(uniq)) > 0
    has_hi_first = np.bincount(inv, weights=~lo_is_a, minlength=len(uniq)) > 0
    ok = (has_lo_first & has_hi_first) if positional else (has_lo_first | has_hi_first)
    uq, ulo, uhi = uniq[ok] // (U * U), (uniq[ok] // U) % U, uniq[ok] % U
    ugap = np.zeros(len(uniq), dtype=np.int64)
    ugap[inv] = gap
    src, has_src = _find(node_keys, uq * U + ulo)
    dst, has_dst = _find(node_keys, uq * U + uhi)
    valid = has_src & has_dst
    src, dst, egap = src[valid], dst[valid], ugap[ok][valid]
    by = np.lexsort((node_overlap[src], node_query[src]))
    # diagonal of each query: its least-overlap node (lowest token id on ties)
    nodes_by = np.lexsort((node_token, node_overlap, node_query))
    first_of_query = np.ones(len(nodes_by), dtype=bool)
    first_of_query[1:] = node_query[nodes_by][1:] != node_query[nodes_by][:-1]
    diag = nodes_by[first_of_query]
    return Graph(node_query, node_token, node_overlap, src[by], dst[by], egap[by], diag, U)


@njit(cache=True)
def _chain_dp(n_nodes, edge_src, edge_dst, edge_w, sources):
    """Best log chain product from each query's source to every node of that query.

    Edges are sorted by the source's overlap within a query and every edge goes
    up in overlap, so one pass relaxes each node after all its in-edges.
    """
    dist = np.full(n_nodes, np.inf)
    for s in sources:
        dist[s] = 0.0
    for e in range(edge_src.shape[0]):
        d = dist[edge_src[e]] + edge_w[e]
        if d < dist[edge_dst[e]]:
            dist[edge_dst[e]] = d
    return dist


def chain_dp(graph: Graph, eps: float, python: bool = False) -> np.ndarray:
    """Log of the best chain product from each query's diagonal to each node."""
    w = np.array([log_rho(g, eps) for g in range(int(graph.edge_gap.max(initial=0)) + 1)])
    edge_w = w[graph.edge_gap] if len(graph.edge_gap) else np.zeros(0)
    fn = _chain_dp.py_func if python else _chain_dp
    return fn(len(graph.node_query), graph.edge_src, graph.edge_dst, edge_w, graph.diag)


def rank_bound(P: np.ndarray) -> float:
    """Lemma 4: ``n^2 / (n + sum_{c != c'} P^2)`` for n x n bounds ``P`` (diagonal ignored)."""
    n = P.shape[0]
    if n == 0:
        return 0.0
    off = P.copy()
    np.fill_diagonal(off, 0.0)
    return n * n / (n + float((off**2).sum()))


def certified_rank(P: np.ndarray, strict: bool) -> int:
    """The integer rank Lemma 4 certifies from chain bounds ``P`` (diagonal ignored).

    With ``strict`` (heads with error strictly below 1/2, the limit ``eps -> 1/2``)
    every off-diagonal entry is strictly below its bound, so with at least one
    off-diagonal pair ``r > value`` and ``r >= floor(value) + 1`` (THEORY section 4);
    otherwise ``r >= ceil(value)``.  At the limit every bound is ``1 / K`` for an
    integer ``K`` (``rho = 1 / (g - 1)``), so the value is recomputed in exact
    rational arithmetic before rounding; if the entries are not such reciprocals
    the rounding falls back to the conservative ``ceil(value - 1e-9)``.
    """
    n = P.shape[0]
    if n == 0:
        return 0
    value = rank_bound(P)
    off = P[~np.eye(n, dtype=bool)]
    if not strict or n < 2:
        return int(math.ceil(value - 1e-9))
    frac = value - math.floor(value)
    if 1e-6 < frac < 1 - 1e-6:  # far from an integer: rounding cannot matter
        return int(math.floor(value)) + 1
    exact = _exact_reciprocal_bound(n, off)
    if exact is None:
        return int(math.ceil(value - 1e-9))
    return int(math.floor(exact)) + 1


def _exact_reciprocal_bound(n: int, off: np.ndarray) -> Fraction | None:
    """``n^2 / (n + sum 1/K^2)`` exactly when every entry of ``off`` is ``1/K``, K integer."""
    if not np.all(np.isfinite(off)) or np.any(off <= 0):
        return None
    inv = 1.0 / off
    K = np.rint(inv)
    if np.any(K > 2**50) or not np.allclose(inv, K, rtol=1e-9, atol=0.0):
        return None
    values, counts = np.unique(K.astype(np.int64), return_counts=True)
    total = sum(Fraction(int(c), int(k) ** 2) for k, c in zip(values, counts, strict=True))
    return Fraction(n * n) / (n + total)


def choose_best_pairs(P: np.ndarray, strict: bool = True) -> tuple[np.ndarray, str]:
    """The pair subset for Lemma 4: exact up to ``OPTIMAL_MAX_PAIRS`` pairs, else greedy.

    Returns ``(indices, "exact" | "greedy")``.
    """
    from sketchsim.certify.subsets import OPTIMAL_MAX_PAIRS, optimal_pairs

    if P.shape[0] <= OPTIMAL_MAX_PAIRS:
        return optimal_pairs(P, strict), "exact"
    return choose_pairs(P), "greedy"


def choose_pairs(P: np.ndarray) -> np.ndarray:
    """A subset of pairs with every off-diagonal bound finite, chosen to maximize Lemma 4.

    Drops the pair with the most unbounded entries until none is left, then
    greedily drops single pairs while that raises the bound.  Row and column
    sums are updated in O(n) per drop (no copies of the matrix), so families
    with thousands of pairs are chosen in seconds; the choices are those of
    ``choose_pairs`` in ``tests/naive.py``, the plain version with full recomputation
    (``tests/certify/test_certify.py::test_choose_pairs_matches_naive``).
    """
    n0 = P.shape[0]
    alive = np.ones(n0, dtype=bool)
    inf = ~np.isfinite(P)
    np.fill_diagonal(inf, False)
    bad = inf.sum(0).astype(np.int64) + inf.sum(1)
    while bad[alive].any():
        j = _first_argmax(np.where(alive, bad, -1))
        alive[j] = False
        bad -= inf[j, :].astype(np.int64) + inf[:, j]
    sq = np.where(inf, 0.0, P) ** 2  # unbounded entries are all among dropped pairs
    np.fill_diagonal(sq, 0.0)
    sq[~alive, :] = 0.0
    sq[:, ~alive] = 0.0
    drop = sq.sum(0) + sq.sum(1)
    total = float(sq.sum())
    n = int(alive.sum())
    while n > 1:
        current = n * n / (n + total)
        candidate = np.where(alive, (n - 1) ** 2 / (n - 1 + total - drop), -np.inf)
        j = _first_argmax(candidate)
        if candidate[j] <= current * (1 + 1e-12):
            break
        alive[j] = False
        total -= float(drop[j])
        drop -= sq[j, :] + sq[:, j]
        drop[j] = 0.0
        sq[j, :] = 0.0
        sq[:, j] = 0.0
        n -= 1
        if n % 256 == 0:  # refresh the running sums so rounding cannot accumulate
            drop = sq.sum(0) + sq.sum(1)
            total = float(sq.sum())
    return np.flatnonzero(alive)


def _first_argmax(values: np.ndarray) -> int:
    """First index whose value is within rounding (1e-12 relative) of the maximum."""
    top = values.max()
    return int(np.argmax(values >= top - 1e-12 * abs(top)))


@dataclass
class Certificate:
    """Certified rank bounds of one family (the JSON of ``sketchsim certify``)."""

    inputs: int
    m: int
    pairs: dict
    bound: dict
    certified_rank: dict
    family_sha256: str
    positional: bool
    queries: int
    edges: int
    subset: dict | None = None  # per eps: "exact" (every subset tried) or "greedy"

    def to_dict(self) -> dict:
        return asdict(self)


def eps_key(eps: float) -> str:
    """JSON key of an eps value (``"0.5"`` is the limit eps -> 1/2)."""
    return "0.5" if eps == LIMIT else f"{eps:g}"


def pair_matrix(graph: Graph, dist: np.ndarray) -> np.ndarray:
    """``P[i, j]``: chain bound for query ``i`` from its diagonal to pair ``j``'s token."""
    dq = graph.node_query[graph.diag]
    dt = graph.node_token[graph.diag]
    node, found = graph.find(dq[:, None], dt[None, :])
    logp = np.where(found, dist[node], np.inf)
    P = np.where(logp <= 1e-12, np.exp(np.minimum(logp, 0.0)), np.inf)  # only P <= 1 bounds
    P[dt[:, None] == dt[None, :]] = np.inf  # the same column token twice: entry is 1
    np.fill_diagonal(P, 0.0)
    return P


#: Pairs above which the certificate works from the sparse list of bounded entries.
DENSE_MAX_PAIRS = 4096
#: Largest set of mutually bounded pairs (dense n x n doubles: 512 MiB at 8,192).
SPARSE_MAX_CLIQUE = 8192


def bounded_entries(graph: Graph, dist: np.ndarray):
    """The finite off-diagonal entries of :func:`pair_matrix` as ``(rows, cols, values)``.

    Memory grows with the number of bounded entries, not with the square of the
    number of pairs, so families with tens of thousands of queries certify.
    """
    dq = graph.node_query[graph.diag]
    dt = graph.node_token[graph.diag]
    ok = np.flatnonzero(dist <= 1e-12)
    ok = ok[np.isin(graph.node_query[ok], dq)]
    row = np.searchsorted(dq, graph.node_query[ok])
    by_token = np.argsort(dt, kind="stable")
    sorted_dt = dt[by_token]
    tok = graph.node_token[ok]
    lo = np.searchsorted(sorted_dt, tok, side="left")
    hi = np.searchsorted(sorted_dt, tok, side="right")
    count = hi - lo
    rows = np.repeat(row, count)
    starts = np.repeat(lo - np.cumsum(count) + count, count) + np.arange(count.sum())
    cols = by_token[starts]
    vals = np.exp(np.minimum(np.repeat(dist[ok], count), 0.0))
    keep = dt[rows] != dt[cols]  # the same token twice (and the diagonal): entry is 1
    return rows[keep], cols[keep], vals[keep]


def choose_pairs_sparse(n: int, rows, cols, vals) -> tuple[np.ndarray, np.ndarray]:
    """:func:`choose_pairs` on the sparse entries; returns ``(keep, P[keep, keep])``.

    Phase 1 (drop the pair with most unbounded entries) runs on counts updated
    per drop; the mutually bounded pairs left then go through the dense phase 2.
    """
    fin_row = np.bincount(rows, minlength=n)
    fin_col = np.bincount(cols, minlength=n)
    bad = 2 * (n - 1) - fin_row - fin_col
    by_row = np.argsort(rows, kind="stable")
    by_col = np.argsort(cols, kind="stable")
    row_start = np.concatenate([[0], np.cumsum(fin_row)])
    col_start = np.concatenate([[0], np.cumsum(fin_col)])
    alive = np.ones(n, dtype=bool)
    while True:
        masked = np.where(alive, bad, -1)
        j = int(np.argmax(masked))
        if masked[j] <= 0:
            break
        alive[j] = False
        bad -= 2
        np.add.at(bad, cols[by_row[row_start[j] : row_start[j + 1]]], 1)
        np.add.at(bad, rows[by_col[col_start[j] : col_start[j + 1]]], 1)
    idx = np.flatnonzero(alive)
    if idx.size > SPARSE_MAX_CLIQUE:
        raise FamilyError(
            f"{idx.size:,} mutually bounded pairs need a dense {idx.size:,}^2 matrix "
            f"(about {idx.size**2 * 8 * 3 / 2**30:.3g} GiB), over the limit "
            f"{SPARSE_MAX_CLIQUE:,} pairs; certify a sub-family"
        )
    pos = np.full(n, -1)
    pos[idx] = np.arange(idx.size)
    both = alive[rows] & alive[cols]
    P = np.zeros((idx.size, idx.size))
    P[pos[rows[both]], pos[cols[both]]] = vals[both]
    keep = choose_pairs(P)
    return idx[keep], P[np.ix_(keep, keep)]


def select_pairs(n: int, eps: float, P: np.ndarray | None = None, entries=None):
    """The pairs Lemma 4 uses at ``eps``, from the dense bounds ``P`` or the sparse ``entries``.

    Parameters
    ----------
    n : int
        Number of candidate pairs.
    eps : float
        Error level (``LIMIT``: strict rounding, the exact subset choice ranks by it).
    P : numpy.ndarray, shape (n, n), optional
        :func:`pair_matrix`; when given, the exact choice up to ``OPTIMAL_MAX_PAIRS``.
    entries : tuple of numpy.ndarray, optional
        ``(rows, cols, values)`` of :func:`bounded_entries`, used when ``P`` is None
        (greedy choice).

    Returns
    -------
    keep : numpy.ndarray
        Indices of the chosen pairs.
    sub : numpy.ndarray
        ``P[keep, keep]``.
    how : str
        ``"exact"`` or ``"greedy"``.
    """
    if P is not None:
        keep, how = choose_best_pairs(P, strict=eps == LIMIT)
        return keep, P[np.ix_(keep, keep)], how
    keep, sub = choose_pairs_sparse(n, *entries)
    return keep, sub, "greedy"


def certify(family: WitnessFamily, eps_list=DEFAULT_EPS, positional: bool = True) -> Certificate:
    """Certified lower bounds on the feature rank ``r`` for each eps (and the limit 1/2).

    Parameters
    ----------
    family : WitnessFamily
        Any length-3 family.
    eps_list : sequence of float
        Error levels ``0 < eps < 1/2`` (the limit 1/2 is always included).
    positional : bool
        Require both orders of a mixed input (position-dependent maps).
    """
    graph = build_graph(family, positional)
    chosen = []
    for eps in (LIMIT, *eps_list):
        dist = chain_dp(graph, eps)
        if len(graph.diag) <= DENSE_MAX_PAIRS:
            keep, sub, how = select_pairs(len(graph.diag), eps, P=pair_matrix(graph, dist))
        else:
            entries = bounded_entries(graph, dist)
            keep, sub, how = select_pairs(len(graph.diag), eps, entries=entries)
        chosen.append((eps, keep, sub, how))
    return certificate_of(
        chosen,
        inputs=int(len(family.tokens)),
        m=family.m,
        family_sha256=family.sha256(),
        positional=positional,
        queries=int(len(graph.diag)),
        edges=int(len(graph.edge_src)),
    )


def certificate_of(chosen, **facts) -> Certificate:
    """A :class:`Certificate` from ``(eps, kept pairs, their matrix, how chosen)`` per level.

    ``facts`` are the family's fields (``inputs``, ``m``, ``family_sha256``,
    ``positional``, ``queries``, ``edges``).
    """
    pairs, bounds, ranks, choice = {}, {}, {}, {}
    for eps, keep, sub, how in chosen:
        key = eps_key(eps)
        choice[key] = how
        pairs[key] = int(keep.size)
        bounds[key] = rank_bound(sub) if keep.size else 0.0
        ranks[key] = certified_rank(sub, strict=eps == LIMIT)
    return Certificate(pairs=pairs, bound=bounds, certified_rank=ranks, subset=choice, **facts)
