"""A ``K``-bit register and an answer's rounding, written once for every jitted runner.

docs/theory.md 5.2 and 5.3: a value ``x`` kept in register ``e`` (``lo_e``, step
``step_e = span_e / (2^K - 1)``, 1 where ``span_e = 0``) is the code
``clip(floor((x - lo_e) / step_e + 1/2), 0, 2^K - 1)`` (NaN: 0, ties half up), and it
reads back as ``lo_e + step_e code``; a query's output ``y`` answers
``clip(floor(y + 1/2), -1, s + 1)``, or ``-1`` for NaN.  The causal runner
(:mod:`sketchsim.sketch.causal_kernel`) rounds its states and the kernel model
(:mod:`sketchsim.sketch.trained`) its tokens' symbols with :func:`register`; both
answer with :func:`answer_of`.  ``tests/naive.py`` is the plain reference and
:mod:`sketchsim.experiments.registers` the torch form.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

__all__ = ["register", "answer_of", "register_steps"]


@njit(inline="always")
def register(x, lo, step, top):
    """``(code, value)``: ``x``'s code ``clip(floor((x - lo) / step + 1/2), 0, top)`` (NaN: 0)
    and what it reads back as, ``lo + step code``; ``top < 0``: ``(0, x)``, exact."""
    if top < 0.0:
        return 0.0, x
    code = np.floor((x - lo) / step + 0.5)
    if not code >= 0.0:
        code = 0.0
    if code > top:
        code = top
    return code, lo + step * code


@njit(inline="always")
def answer_of(y, s):
    """A query's answer: ``clip(floor(y + 1/2), -1, s + 1)``, ``-1`` for NaN."""
    if not y == y:
        return -1
    return int(min(max(math.floor(y + 0.5), -1.0), float(s + 1)))


def register_steps(span: np.ndarray, bits: int) -> np.ndarray:
    """Each register's step at ``bits`` bits: ``span / (2^bits - 1)``, 1 where ``span = 0``."""
    top = float(2**bits - 1)
    return np.where(span > 0, span / top, 1.0)
