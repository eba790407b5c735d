"""The exact softmax temperature at which dense softmax solves Min-IP (THEORY 3b).

``ln(2(N-1))`` (:func:`sketchsim.heads.attention.softmax_threshold`) is only sufficient.
The exact threshold ``beta*`` is found here by bisection over exhaustive
verification (:func:`sketchsim.heads.exhaustive.verify`, every one of the ``2^(mN)`` inputs):
``beta*`` lies in ``(fails, exact]`` of the returned bracket.  At ``N = 3`` it is
``ln(6)/2 ~ 0.8959`` for every m from 2 on (``ln 2`` at m = 1): the worst input
has the query and one other token at overlap ``t + 2`` and one at ``t``, error
``4 e^{-2 beta} / (1 + 2 e^{-2 beta})``, which is 1/2 exactly at ``ln(6)/2``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from sketchsim.heads.attention import softmax_threshold

__all__ = ["SoftmaxThreshold", "exact_softmax_threshold", "closed_form_threshold"]


@dataclass
class SoftmaxThreshold:
    """Bracket of the exact threshold: ``beta = fails`` is wrong somewhere, ``exact`` is exact."""

    m: int
    n: int
    fails: float
    exact: float
    sufficient: float
    verifications: int

    @property
    def beta(self) -> float:
        """Midpoint of the bracket."""
        return 0.5 * (self.fails + self.exact)

    def to_dict(self) -> dict:
        return {**asdict(self), "beta": self.beta}


def closed_form_threshold(m: int, n: int = 3) -> float | None:
    """``ln(6)/2`` at ``N = 3`` for m >= 2, ``ln 2`` at m = 1 (THEORY 3b); None otherwise."""
    import math

    if n != 3:
        return None
    return math.log(2) if m == 1 else math.log(6) / 2


def exact_softmax_threshold(
    m: int, n: int = 3, tol: float = 1e-4, causal: bool = False
) -> SoftmaxThreshold:
    """Bisect the smallest ``beta`` at which dense softmax is exact on all of ``({0,1}^m)^n``.

    Parameters
    ----------
    m, n : int
        Token width and length; ``m * n`` within the exhaustive limit of
        :func:`sketchsim.heads.exhaustive.check_verify_size`.
    tol : float
        Width of the returned bracket.
    causal : bool
        Score only the final position.

    Returns
    -------
    SoftmaxThreshold
        ``fails < beta* <= exact`` with ``exact - fails <= tol``.
    """
    from sketchsim.heads.exhaustive import check_verify_size, verify

    check_verify_size(m, n)
    calls = 0

    def exact(beta: float) -> bool:
        nonlocal calls
        calls += 1
        res = verify(m, n, "softmax", beta=beta, causal=causal)
        return res.exact_fraction == 1.0

    lo, hi = tol / 2, max(softmax_threshold(n), 0.0) + 1.0
    while not exact(hi):  # the sufficient bound makes this loop end at once
        lo, hi = hi, 2 * hi
    if exact(lo):  # every positive beta is exact (n = 1): verify refuses beta = 0
        return SoftmaxThreshold(m, n, 0.0, lo, softmax_threshold(n), calls)
    while hi - lo > tol:
        mid = 0.5 * (lo + hi)
        if exact(mid):
            hi = mid
        else:
            lo = mid
    return SoftmaxThreshold(m, n, lo, hi, softmax_threshold(n), calls)
