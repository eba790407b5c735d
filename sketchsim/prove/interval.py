"""Interval arithmetic on NumPy arrays, moved outward (docs/theory.md 5.5).

An :class:`Iv` is a pair of float64 arrays ``lo <= hi`` (any shape; the first
axis is usually the boxes).  Every operation's result is *widened* by
``2^-46`` of its magnitude plus ``2^-1000``, which covers the rounding of the
operation here, the rounding of the same operation in the engine (in any order
of additions) and a libm function's few ulps, so an interval encloses every
float the engine can compute from floats inside its operands' intervals.  A NaN
bound, or an operation undefined on the interval, gives ``(-inf, +inf)``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["Iv", "REL", "TINY", "dot", "point", "rel_sum", "widen"]

#: The relative widening of every result and the absolute floor under it (theory.md 5.5).
REL = 2.0**-46
TINY = 2.0**-1000
_INF = np.inf


def widen(lo, hi, rel: float = REL) -> Iv:
    """``[lo, hi]`` moved out by ``rel`` of its magnitude plus ``TINY``; NaN: unbounded."""
    with np.errstate(invalid="ignore", over="ignore"):
        lo = np.asarray(lo, dtype=np.float64)
        hi = np.asarray(hi, dtype=np.float64)
        mag = np.maximum(np.abs(lo), np.abs(hi))
        out_lo = lo - (mag * rel + TINY)
        out_hi = hi + (mag * rel + TINY)
        bad = np.isnan(out_lo) | np.isnan(out_hi)
        if bad.any():
            out_lo = np.where(bad, -_INF, out_lo)
            out_hi = np.where(bad, _INF, out_hi)
    return Iv(out_lo, out_hi)


def point(x) -> Iv:
    """A constant: ``[x, x]``, not widened."""
    x = np.asarray(x, dtype=np.float64)
    return Iv(x, x)


class Iv:
    """An interval array: every element ``[lo, hi]``."""

    __slots__ = ("lo", "hi")

    def __init__(self, lo, hi):
        self.lo = lo
        self.hi = hi

    @property
    def shape(self):
        return np.shape(self.lo)

    def reshape(self, *shape) -> Iv:
        return Iv(np.reshape(self.lo, shape), np.reshape(self.hi, shape))

    def __getitem__(self, key) -> Iv:
        return Iv(self.lo[key], self.hi[key])

    def __add__(self, other) -> Iv:
        o = _iv(other)
        with np.errstate(invalid="ignore", over="ignore"):
            return widen(self.lo + o.lo, self.hi + o.hi)

    __radd__ = __add__

    def __neg__(self) -> Iv:
        return Iv(-self.hi, -self.lo)

    def __sub__(self, other) -> Iv:
        o = _iv(other)
        with np.errstate(invalid="ignore", over="ignore"):
            return widen(self.lo - o.hi, self.hi - o.lo)

    def __rsub__(self, other) -> Iv:
        return _iv(other) - self

    def __mul__(self, other) -> Iv:
        o = _iv(other)
        with np.errstate(invalid="ignore", over="ignore"):
            p = np.stack(np.broadcast_arrays(
                self.lo * o.lo, self.lo * o.hi, self.hi * o.lo, self.hi * o.hi
            ))  # fmt: skip
            nan = np.isnan(p).any(axis=0)
            lo, hi = p.min(axis=0), p.max(axis=0)
        return widen(np.where(nan, np.nan, lo), np.where(nan, np.nan, hi))

    __rmul__ = __mul__

    def __truediv__(self, other) -> Iv:
        o = _iv(other)
        zero = (o.lo <= 0) & (o.hi >= 0)
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            p = np.stack(np.broadcast_arrays(
                self.lo / o.lo, self.lo / o.hi, self.hi / o.lo, self.hi / o.hi
            ))  # fmt: skip
            bad = zero | np.isnan(p).any(axis=0)
            lo, hi = p.min(axis=0), p.max(axis=0)
        return widen(np.where(bad, np.nan, lo), np.where(bad, np.nan, hi))

    def __rtruediv__(self, other) -> Iv:
        return _iv(other) / self

    def square(self) -> Iv:
        """The exact range of ``x^2``, widened."""
        with np.errstate(invalid="ignore", over="ignore"):
            a, b = self.lo * self.lo, self.hi * self.hi
            straddles = (self.lo < 0) & (self.hi > 0)
            lo = np.where(straddles, 0.0, np.minimum(a, b))
        return widen(lo, np.maximum(a, b))

    def maximum(self, c: float) -> Iv:
        """``max(x, c)`` for a constant ``c`` (exact)."""
        return Iv(np.maximum(self.lo, c), np.maximum(self.hi, c))

    def monotone(self, f) -> Iv:
        """An increasing function applied to the ends, widened."""
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            return widen(f(self.lo), f(self.hi))

    def unbounded(self) -> np.ndarray:
        return ~(np.isfinite(self.lo) & np.isfinite(self.hi))

    def sum(self, axis) -> Iv:
        """A sum of ``n`` interval terms: the sum of the ends moved out by ``n (2^-46 sum of
        the terms' magnitudes + 2^-1000)``, no tighter than ``n`` widened additions."""
        n = np.shape(self.lo)[axis]
        with np.errstate(invalid="ignore", over="ignore"):
            lo, hi = self.lo.sum(axis=axis), self.hi.sum(axis=axis)
            mag = np.maximum(np.abs(self.lo), np.abs(self.hi)).sum(axis=axis)
        return _moved(lo, hi, n * (mag * REL + TINY))


def rel_sum(n: int) -> float:
    """The relative move-out of a sum of ``n`` terms: ``2^-46 max(1, n / 64)``."""
    return REL * max(1.0, n / 64.0)


def _iv(x) -> Iv:
    return x if isinstance(x, Iv) else point(x)


def _moved(lo, hi, margin) -> Iv:
    with np.errstate(invalid="ignore", over="ignore"):
        lo, hi = lo - margin, hi + margin
        bad = np.isnan(lo) | np.isnan(hi)
    return Iv(np.where(bad, -_INF, lo), np.where(bad, _INF, hi))


def dot(W: np.ndarray, x: Iv, b: np.ndarray | float = 0.0) -> Iv:
    """``b + W x`` for constant ``W`` (``(..., P, n)`` broadcast against ``x`` ``(..., n)``).

    ``[b + sum min(w a, w b), b + sum max(w a, w b)]`` moved out by
    ``2^-46 max(1, n / 64) (|b| + sum |w| max(|a|, |b|)) + 2^-1000`` for ``n`` terms (the
    bias and ``W``'s columns; at least ``n 2^-52``, the rounding of any order of the sum
    here and in the engine: theory.md 5.5).
    """
    W = np.asarray(W, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    xl, xh = x.lo[..., None, :], x.hi[..., None, :]
    with np.errstate(invalid="ignore", over="ignore"):
        p1, p2 = W * xl, W * xh
        lo = b + np.minimum(p1, p2).sum(axis=-1)
        hi = b + np.maximum(p1, p2).sum(axis=-1)
        mag = np.abs(b) + (np.abs(W) * np.maximum(np.abs(xl), np.abs(xh))).sum(axis=-1)
    return _moved(lo, hi, mag * REL + TINY)
