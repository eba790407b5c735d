"""Sign-pattern lower bounds on ``r*(m)`` for nonnegative table heads (Radon and line orders).

Lemma 2 at gap 2 (THEORY section 4): for a query ``x`` and keys ``u, u'`` with
``<x,u'> >= <x,u> + 2``, every head with error ``eps < 1/2`` on ``(x,u,u)``,
``(x,u',u')``, ``(x,u,u')`` has ``D_u' < rho(2, eps) D_u`` with
``rho(2, eps) = eps / (1 - eps) < 1``, hence ``alpha(x,u') < alpha(x,u)``.

A nonnegative head of rank ``r`` has ``alpha(x,u) = <a_x, b_u>`` with
``a_x >= 0`` and ``a_x != 0`` (else every denominator of query ``x`` is 0).
Scaling ``a_x`` to the simplex changes no output, and the sign of
``alpha(x,u) - alpha(x,u')`` is then an affine function of the point ``a_x`` of
an ``(r-1)``-dimensional simplex.  So every ordered key pair ``(u, u')`` demands
a hyperplane strictly separating the points of the queries in
``P = {x : <x,u'> - <x,u> >= 2}`` from those in ``N = {x : <x,u> - <x,u'> >= 2}``.

- *Radon*: any ``r + 1`` points of ``R^(r-1)`` split into two parts whose
  convex hulls meet.  If ``k`` queries are *shattered* (every split of them into
  two nonempty parts lies inside some demand's ``(P, N)``), then ``r >= k``.
  The ``floor(m/2)`` disjoint pairs of coordinates are shattered
  (:func:`block_queries`), so ``r*(m) >= floor(m/2)`` at every ``m``.
- *Line orders* (``r = 2``): the points lie on a segment, so some linear order
  of the queries puts, for every demand, all of ``P`` before all of ``N`` or
  after.  If no order does, ``r >= 3``.  At ``m = 5`` the five edges of a
  pentagon (weight-2 queries) admit no such order (:func:`pentagon_queries`).

Every ``m``-bit task contains the ``(m-1)``-bit one (pad every token with a 0),
so ``r*(m)`` does not decrease with ``m``.  Signed heads are not covered
(``alpha`` rows may change sign, and Lemma 2 needs positive denominators).
"""

from __future__ import annotations

import itertools

import numpy as np

from sketchsim.errors import SketchsimError

__all__ = [
    "order_demands",
    "restrict",
    "is_shattered",
    "largest_shattered",
    "separating_order",
    "pentagon_queries",
    "block_queries",
    "order_lower_bound",
    "demand_margin",
    "ORDERS_MAX_M",
    "ORDER_MAX_QUERIES",
]

#: Widest m whose demands are enumerated (``4^m`` key pairs).
ORDERS_MAX_M = 8
#: Most queries :func:`separating_order` tries every order of.
ORDER_MAX_QUERIES = 9

Demand = tuple[frozenset, frozenset]


def _overlaps(m: int) -> np.ndarray:
    """``<x, u>`` for all tokens (token ``z``: element ``k`` is bit ``k`` of ``z``)."""
    z = np.arange(2**m)
    return np.bitwise_count(z[:, None] & z[None, :]).astype(np.int64)


def order_demands(m: int) -> list[Demand]:
    """The distinct demands ``(P, N)`` (both nonempty) of all ordered key pairs at width ``m``.

    ``alpha(x, u) > alpha(x, u')`` for ``x`` in ``P`` and ``<`` for ``x`` in ``N``.
    """
    if not 1 <= m <= ORDERS_MAX_M:
        raise SketchsimError(f"order demands need 1 <= m <= {ORDERS_MAX_M}, got m = {m}")
    ov = _overlaps(m)
    out = set()
    for u in range(2**m):
        diff = ov - ov[:, u : u + 1]  # diff[x, u'] = <x,u'> - <x,u>
        for v in range(2**m):
            P = frozenset(np.flatnonzero(diff[:, v] >= 2).tolist())
            N = frozenset(np.flatnonzero(diff[:, v] <= -2).tolist())
            if P and N:
                out.add((P, N))
    return sorted(out, key=lambda d: (sorted(d[0]), sorted(d[1])))


def restrict(demands: list[Demand], queries) -> list[Demand]:
    """Each demand cut down to ``queries`` (those left with both sides nonempty)."""
    Q = frozenset(queries)
    out = {(P & Q, N & Q) for P, N in demands}
    return sorted((d for d in out if d[0] and d[1]), key=lambda d: (sorted(d[0]), sorted(d[1])))


def is_shattered(demands: list[Demand], queries) -> bool:
    """Whether every split of ``queries`` into two nonempty parts lies inside some demand."""
    Q = sorted(queries)
    if len(Q) < 2:
        return len(Q) == 1
    splits = set()
    for P, N in restrict(demands, Q):
        if P | N == frozenset(Q):
            splits.add(P if Q[0] in P else N)  # the side holding the first query
    return len(splits) == 2 ** (len(Q) - 1) - 1


def largest_shattered(m: int, kmax: int = 6) -> tuple[int, tuple]:
    """The largest shattered query set at width ``m`` (up to ``kmax``), level by level.

    Shattered sets are closed under taking subsets, so each level grows the last.

    Returns
    -------
    size : int
        ``r*(m) >= size`` (Radon).
    example : tuple of int
        One shattered set of that size.
    """
    demands = order_demands(m)
    level = [(x,) for x in range(2**m)]
    best = (1, (0,))
    for k in range(2, kmax + 1):
        prev = set(level)
        cands = {
            Q + (x,)
            for Q in level
            for x in range(Q[-1] + 1, 2**m)
            if all(tuple(y for y in Q + (x,) if y != z) in prev for z in Q)
        }
        level = sorted(Q for Q in cands if is_shattered(demands, Q))
        if not level:
            break
        best = (k, level[0])
    return best


def separating_order(demands: list[Demand]) -> tuple | None:
    """A linear order of the demands' queries separating every demand, or None (then ``r >= 3``).

    Tries every order, so only for at most :data:`ORDER_MAX_QUERIES` queries.
    """
    queries = sorted(set().union(*(P | N for P, N in demands))) if demands else []
    if len(queries) > ORDER_MAX_QUERIES:
        raise SketchsimError(
            f"{len(queries)} queries: every order is tried, limit {ORDER_MAX_QUERIES}"
        )
    for order in itertools.permutations(queries):
        pos = {q: k for k, q in enumerate(order)}
        if all(_separated(pos, P, N) for P, N in demands):
            return order
    return None


def _separated(pos: dict, P: frozenset, N: frozenset) -> bool:
    p = [pos[q] for q in P]
    n = [pos[q] for q in N]
    return max(p) < min(n) or max(n) < min(p)


def pentagon_queries(m: int = 5) -> list[int]:
    """The weight-2 queries on the edges of the 5-cycle 0-1-2-3-4-0 (tokens of width ``m >= 5``).

    Key pair ``(e, complement of e within {0..4})`` demands query ``e`` apart from
    the two edges disjoint from ``e``; on a line one of the five lies between
    its two disjoint edges, so no rank-2 head exists.
    """
    if m < 5:
        raise SketchsimError(f"the pentagon needs m >= 5, got m = {m}")
    return [(1 << i) | (1 << ((i + 1) % 5)) for i in range(5)]


def block_queries(m: int) -> list[int]:
    """The ``floor(m/2)`` weight-2 queries on coordinates ``{2i, 2i+1}``.

    For a split ``(A, B)`` of them the key pair ``(u, u')`` with ``u'`` the union
    of the blocks in ``A`` and ``u`` that of ``B`` gives every query in ``A`` a gap
    of +2 and every query in ``B`` a gap of -2: the blocks are shattered.
    """
    return [0b11 << (2 * i) for i in range(m // 2)]


def order_lower_bound(m: int, kmax: int = 6, search: bool = True) -> dict:
    """``r*(m) >=`` the largest of the Radon bounds and the pentagon's 3 (``m >= 5``).

    Parameters
    ----------
    m : int
        Token width, ``1 <= m <= ORDERS_MAX_M``.
    kmax : int
        Largest shattered set searched for.
    search : bool
        Search for the largest shattered set (else only the blocks are checked).

    Returns
    -------
    dict
        ``lower``; ``shattered`` (size and example of the largest set found),
        ``blocks`` (whether :func:`block_queries` is shattered) and ``pentagon``
        (whether the pentagon's demands admit no separating order).
    """
    demands = order_demands(m)
    blocks = block_queries(m)
    blocks_ok = len(blocks) >= 2 and is_shattered(demands, blocks)
    size, example = largest_shattered(m, kmax) if search else (1, (0,))
    if blocks_ok and len(blocks) > size:
        size, example = len(blocks), tuple(blocks)
    pentagon = m >= 5 and separating_order(restrict(demands, pentagon_queries(m))) is None
    lower = max(size, 3 if pentagon else 1)
    return {
        "m": m,
        "lower": lower,
        "shattered": [size, list(example)],
        "blocks": blocks_ok,
        "pentagon": pentagon,
    }


def demand_margin(alpha: np.ndarray) -> float:
    """Largest ``alpha(x,u') / alpha(x,u)`` over all gap->=2 comparisons of a kernel table.

    Every head with error < 1/2 has it below 1 (the demands this module uses).
    """
    alpha = np.asarray(alpha, dtype=np.float64)
    m = alpha.shape[0].bit_length() - 1
    ov = _overlaps(m)
    worst = 0.0
    for x in range(2**m):
        mask = ov[x][None, :] - ov[x][:, None] >= 2  # mask[u, u']
        if mask.any():
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = alpha[x][None, :] / alpha[x][:, None]
            worst = max(worst, float(np.nan_to_num(ratio[mask], nan=np.inf).max()))
    return worst
