"""Gap domination and chain products (THEORY section 4, Lemmas 2 and 3)."""

from __future__ import annotations

import math
from functools import cache

__all__ = ["rho", "log_rho", "best_chain_product", "best_steps", "LIMIT"]

#: The ``eps -> 1/2`` limit, the regime of every head with error below 1/2.
LIMIT = 0.5


def rho(gap: float, eps: float = LIMIT) -> float:
    """Domination factor ``rho(g, eps) = 2 eps / (g - 2 eps)`` (Lemma 2).

    ``D_u' < rho * D_u`` when ``<x,u'> - <x,u> = g``; ``inf`` when ``g <= 2 eps``
    (no constraint).  ``eps = 0.5`` is the limit ``1 / (g - 1)``.
    """
    if gap <= 2 * eps:
        return math.inf
    return 2 * eps / (gap - 2 * eps)


def log_rho(gap: float, eps: float = LIMIT) -> float:
    """``log rho(gap, eps)``; ``inf`` where ``rho`` is."""
    r = rho(gap, eps)
    return math.inf if r == math.inf else math.log(r)


@cache
def best_steps(gap: int, eps: float = LIMIT) -> tuple[int, ...]:
    """Split an overlap gap into chain steps minimizing the product of ``rho`` (Lemma 3).

    Returns the step sizes (summing to ``gap``), or ``()`` when no split gives a
    finite product.
    """
    best = [math.inf] * (gap + 1)
    choice = [0] * (gap + 1)
    best[0] = 0.0
    for g in range(1, gap + 1):
        for step in range(1, g + 1):
            cost = best[g - step] + log_rho(step, eps)
            if cost < best[g]:
                best[g], choice[g] = cost, step
    if best[gap] == math.inf:
        return ()
    steps, g = [], gap
    while g:
        steps.append(choice[g])
        g -= choice[g]
    return tuple(sorted(steps, reverse=True))


def best_chain_product(gap: int, eps: float = LIMIT) -> float:
    """Smallest chain product ``P`` across an overlap gap when every step is available."""
    steps = best_steps(gap, eps)
    if not steps:
        return math.inf
    return math.prod(rho(s, eps) for s in steps)
