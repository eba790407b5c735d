"""Certifying a packed family block by block, straight from its keys (THEORY section 4).

:func:`certify_packed` is :func:`~sketchsim.certify.certificate.certify` run on blocks of
whole queries (:func:`~sketchsim.certify.certificate.graph_of_keys`): a query's
domination graph depends only on the inputs where it is scored, so the blocks' graphs are
the pieces of the family's graph and the certificate equals ``certify`` on the unpacked
family (tested), in memory for one block.
"""

from __future__ import annotations

import numpy as np

from sketchsim.certify import certificate as cert_mod
from sketchsim.certify.certificate import (
    DEFAULT_EPS,
    Certificate,
    certificate_of,
    chain_dp,
    graph_of_keys,
    select_pairs,
)
from sketchsim.certify.chains import LIMIT
from sketchsim.certify.packed import BLOCK_INPUTS, BLOCK_LOOKUPS, PackedFamily

__all__ = ["certify_packed"]


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
