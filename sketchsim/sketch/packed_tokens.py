"""Jitted helpers for protocols that read a token's packed bits."""

from __future__ import annotations

import numpy as np
from numba import njit

from sketchsim.minip.bits import popcount64

__all__ = ["bit", "count_ones", "field", "inner_product"]


@njit(inline="always")
def bit(bits, k):
    """Element ``k`` (0/1, int64) of a packed token."""
    return np.int64((bits[k >> 6] >> np.uint64(k & 63)) & np.uint64(1))


@njit(inline="always")
def count_ones(bits, lo, hi):
    """Number of ones among elements ``lo .. hi-1`` of a packed token."""
    if hi - lo <= 64:  # one or two words, no loop (a block of a few bits: the common case)
        if hi <= lo:
            return np.int64(0)
        width = hi - lo
        w = lo >> 6
        sh = lo & 63
        word = bits[w] >> np.uint64(sh)
        if sh + width > 64:  # then sh >= 1: the shift below is 1..63
            word = word | (bits[w + 1] << np.uint64(64 - sh))
        if width < 64:
            word = word & ((np.uint64(1) << np.uint64(width)) - np.uint64(1))
        return popcount64(word)
    total = np.int64(0)
    k = lo
    while k < hi:
        w = k >> 6
        start = k & 63
        stop = min(64, start + (hi - k))
        width = stop - start
        word = bits[w] >> np.uint64(start)
        if width < 64:
            word = word & ((np.uint64(1) << np.uint64(width)) - np.uint64(1))
        total += popcount64(word)
        k += width
    return total


@njit(inline="always")
def field(bits, lo, width):
    """Elements ``lo .. lo+width-1`` (``width <= 32``) as an int64 in ``[0, 2^width)``."""
    w = lo >> 6
    sh = lo & 63
    word = bits[w] >> np.uint64(sh)
    if sh + width > 64:  # the field straddles two words
        word = word | (bits[w + 1] << np.uint64(64 - sh))
    return np.int64(word & ((np.uint64(1) << np.uint64(width)) - np.uint64(1)))


@njit(inline="always")
def inner_product(bits, other):
    """``<x, y>`` of two packed tokens of the same length."""
    total = np.int64(0)
    for w in range(bits.shape[0]):
        total += popcount64(bits[w] & other[w])
    return total
