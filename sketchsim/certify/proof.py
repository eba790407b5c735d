"""The certificate as a proof object a referee can check (THEORY section 4).

:func:`certificate_proof` runs the certificate of :mod:`sketchsim.certify.certificate`
at one error level and writes down everything its bound rests on: the family
(tokens and inputs), the chosen pairs ``(x_c, c)``, and for every ordered pair
``c != c'`` the chain ``c = u_0, u_1, ..., u_K = c'`` whose product bounds
``alpha(x_c, c') / alpha(x_c, c)``.  :mod:`sketchsim.certify.check` re-verifies
such a file from the definitions alone, with exact rationals and no code shared
with this module.

File format (JSON, ``format = "sketchsim-certificate/1"``): ``m``,
``position`` (1-3, the scored position), ``positional`` (both orders of a mixed
input required), ``eps`` (a rational ``"p/q"``; ``"1/2"`` is the limit of every
head with error below 1/2, where the bound is strict), ``tokens`` (0/1 strings),
``inputs`` (index triples into ``tokens``, in position order), ``pairs``
(``[query, candidate]`` token indices), ``chains`` (``{"row", "col", "path"}``,
``path`` a list of token indices from ``pairs[row]``'s candidate to
``pairs[col]``'s), the producer's ``claimed`` bound and rank, and
``family_sha256``: :meth:`~sketchsim.certify.witness.WitnessFamily.sha256`, the sha256
of the family's uint8 tokens ``(inputs, 3, m)`` in C order followed by the
scored position in decimal (the checker recomputes it from ``tokens`` and
``inputs``).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from sketchsim.certify.certificate import (
    DENSE_MAX_PAIRS,
    bounded_entries,
    build_graph,
    certified_rank,
    chain_dp,
    choose_best_pairs,
    choose_pairs_sparse,
    pair_matrix,
    rank_bound,
)
from sketchsim.certify.chains import LIMIT, log_rho
from sketchsim.certify.witness import WitnessFamily
from sketchsim.errors import FamilyError

__all__ = ["FORMAT", "certificate_proof"]

FORMAT = "sketchsim-certificate/1"


def _chosen(graph, dist):
    if len(graph.diag) <= DENSE_MAX_PAIRS:
        P = pair_matrix(graph, dist)
        keep = choose_best_pairs(P)[0]
        return keep, P[np.ix_(keep, keep)]
    return choose_pairs_sparse(len(graph.diag), *bounded_entries(graph, dist))


def _in_edges(graph, eps: float):
    w = [log_rho(int(g), eps) for g in graph.edge_gap]
    into: dict[int, list] = {}
    for e in range(len(graph.edge_src)):
        into.setdefault(int(graph.edge_dst[e]), []).append((int(graph.edge_src[e]), w[e]))
    return into


def _path(source: int, target: int, dist, into) -> list[int]:
    """Nodes of a best chain from ``source`` to ``target`` (backtracked through ``dist``)."""
    path, v = [target], target
    for _ in range(len(dist) + 1):
        if v == source:
            return path[::-1]
        step = None
        for u, w in into.get(v, ()):
            if np.isfinite(dist[u]) and abs(dist[u] + w - dist[v]) <= 1e-9 * max(1.0, abs(dist[v])):
                step = u
                break
        if step is None:
            break
        path.append(step)
        v = step
    raise FamilyError(f"no chain recovered from node {source} to node {target}")


def certificate_proof(family: WitnessFamily, eps: float = LIMIT, positional: bool = True) -> dict:
    """The certificate of ``family`` at error level ``eps`` with every chain written out.

    Parameters
    ----------
    family : WitnessFamily
        A length-3 family.
    eps : float
        The error level (``0.5``: the limit, a strict bound for every head with
        error below 1/2; smaller values must be exact binary fractions' ratios,
        as ``0.25``).
    positional : bool
        Require both orders of a mixed input.

    Returns
    -------
    dict
        The JSON-ready proof object described in the module docstring.
    """
    m = family.m
    flat = family.tokens.reshape(-1, m)
    table, inverse = np.unique(flat, axis=0, return_inverse=True)
    inputs = inverse.reshape(-1, 3)
    graph = build_graph(family, positional)
    dist = chain_dp(graph, eps)
    keep, sub = _chosen(graph, dist)
    into = _in_edges(graph, eps)
    nodes = {
        (int(q), int(t)): k
        for k, (q, t) in enumerate(zip(graph.node_query, graph.node_token, strict=True))
    }
    diag = [int(graph.diag[i]) for i in keep]
    pairs = [[int(graph.node_query[d]), int(graph.node_token[d])] for d in diag]
    chains = []
    for row, (query, _) in enumerate(pairs):
        for col, (_, token) in enumerate(pairs):
            if row == col:
                continue
            path = _path(diag[row], nodes[(query, token)], dist, into)
            chains.append(
                {"row": row, "col": col, "path": [int(graph.node_token[v]) for v in path]}
            )
    value = rank_bound(sub) if len(keep) else 0.0
    strict = eps == LIMIT
    return {
        "format": FORMAT,
        "m": m,
        "position": int(family.position),
        "positional": positional,
        "eps": str(Fraction(eps).limit_denominator(10**6)),
        "strict": strict,
        "tokens": ["".join("1" if b else "0" for b in row) for row in table],
        "inputs": inputs.tolist(),
        "pairs": pairs,
        "chains": chains,
        "claimed": {
            "pairs": len(pairs),
            "bound": value,
            "certified_rank": certified_rank(sub, strict) if len(keep) else 0,
        },
        "family_sha256": family.sha256(),
    }
