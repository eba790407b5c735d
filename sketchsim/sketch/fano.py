"""The error-rate floor (docs/theory.md 5.4): transcript bits a model needs when it is right
on only most inputs, by Fano's inequality.

A model whose answer vector ``A_hat = g(T)`` (a function of the transcript, the
queries being fixed) is wrong with probability ``P_e`` on the family's
distribution has

    H(T) >= H(A) - h(P_e) - P_e log2(M - 1)

with ``M`` the number of answer vectors and ``h`` the binary entropy; for the
per-answer form, with independent answers of ``s + 1`` values each and answer
``i`` wrong with probability ``p_i``,

    H(T) >= sum_i [ H(A_i) - h(p_i) - p_i log2(s) ].

Both right sides decrease in the error rates (up to ``1 - 1/M``, resp.
``s / (s + 1)``), so an upper confidence bound on the rates gives a floor at
that confidence.  ``log2 #distinct >= H(T)`` and the declared bits are at least
that, so either floor bounds every measure of the transcript sketchsim reports.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["binary_entropy", "fano_floor", "per_answer_floor", "sampled_floor"]


def binary_entropy(p: float) -> float:
    """``h(p) = -p log2 p - (1 - p) log2 (1 - p)`` (0 at 0 and 1)."""
    if p <= 0.0 or p >= 1.0:
        return 0.0
    return -p * math.log2(p) - (1.0 - p) * math.log2(1.0 - p)


def _log2_minus_one(log2_m: float) -> float:
    """``log2(M - 1)`` from ``log2 M`` without forming ``M`` (``M`` may be ``8^64``)."""
    if log2_m <= 0.0:
        return -math.inf
    return log2_m + math.log2(-math.expm1(-log2_m * math.log(2.0)))


def fano_floor(answer_bits: float, log2_answers: float, p_error: float) -> float:
    """Fano's floor on ``H(T)``: ``answer_bits - h(p) - p log2(M - 1)``, at least 0.

    Parameters
    ----------
    answer_bits : float
        ``H(A)``, the entropy of the answer vector (``q log2(s+1)`` for independent
        uniform answers: the family's ``bound_bits``).
    log2_answers : float
        ``log2 M``, the number of answer vectors (``q log2(s+1)``).
    p_error : float
        The probability that the answer vector is wrong, or an upper bound on it
        (the floor decreases in it up to ``1 - 1/M``, where it is at most 0).

    Returns
    -------
    float
        Bits; ``answer_bits`` at ``p_error = 0``.
    """
    if not 0.0 <= p_error <= 1.0 or math.isnan(p_error):
        raise ValueError(f"an error rate is in [0, 1], got {p_error!r}")
    if p_error == 0.0:
        return float(answer_bits)
    top = -math.expm1(-log2_answers * math.log(2.0))  # 1 - 1/M: where the floor bottoms out
    p = min(p_error, top)
    return max(0.0, answer_bits - binary_entropy(p) - p * _log2_minus_one(log2_answers))


def per_answer_floor(s: int, p_errors: Sequence[float],
                     answer_bits: Sequence[float] | None = None) -> float:  # fmt: skip
    """The per-answer form: ``sum_i max(0, H(A_i) - h(p_i) - p_i log2 s)`` (docs/theory.md
    5.4), for independent answers of ``s + 1`` values (``H(A_i) = log2(s+1)`` unless
    ``answer_bits`` gives them) wrong with probabilities (or upper bounds) ``p_errors``."""
    out = 0.0
    for i, p in enumerate(p_errors):
        bits = math.log2(s + 1) if answer_bits is None else answer_bits[i]
        out += fano_floor(bits, math.log2(s + 1), p)
    return out


def sampled_floor(answer_bits: float, q: int, s: int, wrong: int, inputs: int,
                  confidence: float = 0.95) -> float:  # fmt: skip
    """Fano's floor at the one-sided Clopper-Pearson upper bound on the error rate of
    ``wrong`` of ``inputs`` sampled inputs: a floor on ``H(T)`` at ``confidence``."""
    from sketchsim.sketch.verdicts import error_rate_upper

    p = error_rate_upper(wrong, inputs, confidence)
    return fano_floor(answer_bits, q * math.log2(s + 1), p)
