"""The feature maps the engine computes, jitted once for every kernel that reads them.

``feature(z, code)``: ``elu1`` (code 0) ``z + 1`` above 0, else ``exp(z)``; ``relu``
(1) ``max(z, 0) + 10^-3``; ``signed`` (2) ``z``; ``softplus`` (3) :func:`softplus`;
``elu1sum`` (4, causal linear attention only) elu1 here, divided by the features' sum by
its caller.  Codes 0-3 are the positions in :data:`sketchsim.sketch.trained.FEATURE_MAPS`
(docs/theory.md 5.2, 5.3); ``tests/naive.py`` writes the same maps in NumPy.
"""

from __future__ import annotations

import math

from numba import njit

__all__ = ["feature", "softplus"]


@njit(inline="always")
def softplus(z):
    """``log(1 + e^z)`` as ``z + log1p(e^-z)`` above 0, else ``log1p(e^z)`` (no overflow)."""
    return z + math.log1p(math.exp(-z)) if z > 0.0 else math.log1p(math.exp(z))


@njit(inline="always")
def feature(z, code):
    """The feature map of ``code`` at ``z`` (the module docstring)."""
    if code == 0 or code == 4:
        return z + 1.0 if z > 0.0 else math.exp(z)
    if code == 1:
        return (z if z > 0.0 else 0.0) + 1e-3
    if code == 3:
        return softplus(z)
    return z
