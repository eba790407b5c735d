"""Nonnegative kernel attention heads as sketches (THEORY section 5, last part).

A head's sketch is ``(sum_j phi_K(x_j) v(x_j)^T, sum_j phi_K(x_j))``: ``r(d+1)``
entries, each a ``bits``-bit saturating register (``sum`` channel with
``levels = 2^bits``), so ``B = r (d+1) bits`` per head.

The head solves F(q, s) at full precision with rank 1 (THEORY 5: "``<x_i, sum_j x_j>``
recovers ``t_i``"):

- features: ``phi_Q(x) = (1, ..., 1)``, ``phi_K(x_j) = e_{j mod r}`` (position
  dependent), so ``alpha = 1`` and ``r`` only splits the sums into ``r`` registers;
- values ``identity``: ``v(u) = u`` (``d = m``), readout ``a(x_i) = N x_i``,
  ``b(x_i) = -(|x_i| + (q-1)(s+1))``;
- values ``blocks``: ``v(u)`` = the ``q`` block counts of ``u`` (``d = q``),
  readout ``a(x_i) = N e_i``, ``b = -s``.

With ``H`` heads, value coordinate ``c`` belongs to head ``c mod H`` and the
readouts add up.  The query rounds ``y`` to the nearest integer.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from sketchsim.errors import PluginError
from sketchsim.minip.bits import popcount64, trailing_zeros64
from sketchsim.sketch.contract import check_engine_size
from sketchsim.sketch.packed_tokens import count_ones
from sketchsim.sketch.protocol import Layer, Param, Plan

__all__ = ["KERNEL_PARAMS", "kernel_plan", "head_dims"]

VALUES = ("identity", "blocks")

KERNEL_PARAMS = (
    Param("r", "int", 1, "features per head", minimum=1),
    Param("bits", "int", 8, "bits per sketch entry", minimum=1, maximum=62),
    Param("values", "str", "identity", "value map", choices=VALUES),
)


@njit(inline="always")
def _word_below(bits, w, d):
    """Word ``w`` of a packed token with the elements at ``d`` and beyond cleared."""
    x = bits[w]
    rem = d - w * 64
    if rem < 64:
        x &= (np.uint64(1) << np.uint64(rem)) - np.uint64(1)
    return x


# Value coordinate c goes to head h = c mod H, slot c // H.  ``aux`` carries, after
# [H, r, mode, d], three tables over c: the entry of c for feature 0, the stride
# to the next feature (d_h + 1), and h; then two over heads: each head's first
# entry and d_h.  So the loops below divide nothing.  With one head the entry of
# c is 1 + c + k (d + 1), read without a table.
# emit writes only nonzero entries (``out`` starts at zero, docs/protocols.md)
# and a query sums over its own set bits: O(|x|) instead of O(m) per token.
_T = 4


@njit(inline="always")
def _entry(aux, d, c, k):
    return int(aux[_T + c]) + k * int(aux[_T + d + c])


@njit(cache=True)
def emit(layer, pos, bits, ctx, state, aux, out):
    H, r, mode, d = int(aux[0]), int(aux[1]), int(aux[2]), int(aux[3])
    k = pos % r
    heads = _T + 3 * d
    for h in range(H):
        out[int(aux[heads + h]) + k * (int(aux[heads + H + h]) + 1)] = 1
    if mode == 0:
        for w in range(min(bits.shape[0], (d + 63) >> 6)):
            x = _word_below(bits, w, d)
            while x:
                c = w * 64 + trailing_zeros64(x)
                x &= x - np.uint64(1)
                if H == 1:
                    out[1 + c + k * (d + 1)] = 1
                else:
                    out[_entry(aux, d, c, k)] = 1
    else:
        s = ctx[1]
        for c in range(d):
            out[_entry(aux, d, c, k)] = count_ones(bits, c * s, (c + 1) * s)


@njit(inline="always")
def _value_sum(sketch, aux, d, r, c):
    """Sum over the ``r`` features of value coordinate ``c``'s entries."""
    e, step = int(aux[_T + c]), int(aux[_T + d + c])
    t = sketch[e]
    for k in range(1, r):
        t += sketch[e + k * step]
    return t


# A query's set bits are walked word by word, each nonzero word by a loop counted
# in advance (its popcount), not by one that tests the word after every bit.


@njit(inline="always")
def _one_feature_sum(bits, sketch, d):
    """``(sum of sketch[1 + c], number of c)`` over the token's set elements ``c < d``."""
    num = 0
    ones = 0
    for w in range(min(bits.shape[0], (d + 63) >> 6)):
        x = _word_below(bits, w, d)
        if x == 0:
            continue
        p = popcount64(x)
        ones += p
        base = 1 + w * 64
        for _ in range(p):
            num += sketch[base + trailing_zeros64(x)]
            x &= x - np.uint64(1)
    return num, ones


@njit(inline="always")
def _features_sum(bits, sketch, d, r):
    """As :func:`_one_feature_sum`, each element's value summed over ``r`` features."""
    num = 0
    ones = 0
    for w in range(min(bits.shape[0], (d + 63) >> 6)):
        x = _word_below(bits, w, d)
        if x == 0:
            continue
        p = popcount64(x)
        ones += p
        for _ in range(p):
            c = w * 64 + trailing_zeros64(x)
            x &= x - np.uint64(1)
            for k in range(r):
                num += sketch[1 + c + k * (d + 1)]
    return num, ones


@njit(inline="always")
def _head_sums(bits, state, sketch, aux, d, r):
    """Each head's value sum over the token's set elements ``c < d`` into
    ``state[1 + h]``; returns their number."""
    for h in range(1, int(aux[0]) + 1):
        state[h] = 0
    ones = 0
    for w in range(min(bits.shape[0], (d + 63) >> 6)):
        x = _word_below(bits, w, d)
        if x == 0:
            continue
        p = popcount64(x)
        ones += p
        for _ in range(p):
            c = w * 64 + trailing_zeros64(x)
            x &= x - np.uint64(1)
            state[1 + int(aux[_T + 2 * d + c])] += _value_sum(sketch, aux, d, r, c)
    return ones


@njit(inline="always")
def _feature_sum(sketch, off, dh, r):
    """A head's normalizer: its ``r`` feature entries, from ``off`` by ``dh + 1``, as a float."""
    z = 0.0
    for k in range(r):
        z += sketch[off + k * (dh + 1)]
    return z


@njit(cache=True)
def update(layer, pos, bits, ctx, state, sketch, aux):
    q, s, N = ctx[0], ctx[1], ctx[3]
    if pos >= q:
        return
    H, r, mode, d = int(aux[0]), int(aux[1]), int(aux[2]), int(aux[3])
    # The value sums are integers: summed as int64 they equal the float sums they
    # replace (every partial sum is at most N (s + 1) r m, far below 2^53).  One
    # head and several take separate paths, each case of the value sum its own
    # loop: one loop with branches on H, r and mode ran the kernel protocol 1.4x,
    # and a readout with them 1.15x, slower (issue #31).  The float operations and
    # their order are the same on every path.
    if H == 1 and mode == 0 and r == 1:  # one feature: entry 1 + c, normalizer entry 0
        num, ones = _one_feature_sum(bits, sketch, d)
        y = 0.0
        if d > 0:
            z = float(sketch[0])
            if z == 0.0:
                state[0] = -1
                return
            y += N * float(num) / z
        state[0] = int(round(y - (ones + (q - 1) * (s + 1))))
        return
    if H == 1:  # the head's first entry is 0 and it carries all d values
        if mode == 0:
            num, ones = _features_sum(bits, sketch, d, r)
            bias = ones + (q - 1) * (s + 1)
        else:  # blocks: e_pos, its own count
            num = _value_sum(sketch, aux, d, r, pos) if pos < d else 0
            bias = s
        y = 0.0
        if d > 0:
            z = _feature_sum(sketch, 0, d, r)
            if z == 0.0:
                state[0] = -1
                return
            y += N * float(num) / z
        state[0] = int(round(y - bias))
        return
    heads = _T + 3 * d
    y = 0.0
    if mode == 0:  # the query's own set bits pick the heads' value sums
        bias = _head_sums(bits, state, sketch, aux, d, r) + (q - 1) * (s + 1)
        for h in range(H):
            off, dh = int(aux[heads + h]), int(aux[heads + H + h])
            if dh > 0:
                z = _feature_sum(sketch, off, dh, r)
                if z == 0.0:
                    state[0] = -1
                    return
                y += N * float(state[1 + h]) / z
    else:  # blocks: e_pos, its own count, in head pos mod H
        bias = s
        for h in range(H):
            off, dh = int(aux[heads + h]), int(aux[heads + H + h])
            if dh > 0:
                z = _feature_sum(sketch, off, dh, r)
                if z == 0.0:
                    state[0] = -1
                    return
                own = pos < d and int(aux[_T + 2 * d + pos]) == h
                y += N * float(_value_sum(sketch, aux, d, r, pos) if own else 0) / z
    state[0] = int(round(y - bias))


@njit(cache=True)
def answer(pos, bits, ctx, state, aux):
    return state[0]


def head_dims(d: int, heads: int) -> list[int]:
    """Value coordinates carried by each head."""
    return [(d - h + heads - 1) // heads if h < d else 0 for h in range(heads)]


def kernel_plan(ctx, r: int, bits: int, values: str, heads: int = 1) -> Plan:
    """The plan of ``heads`` kernel heads with ``r`` features and ``bits``-bit entries."""
    if bits > 62:
        raise PluginError(f"bits must be <= 62, got {bits}")
    d = ctx.m if values == "identity" else ctx.q
    # sum over heads of r (d_h + 1) = r (d + heads): bounded before any list is built
    check_engine_size(
        ctx.n_tokens + r * (d + heads), what=f"r={r} features, {heads} heads and d={d} values"
    )
    alphabet = 2 if values == "identity" else ctx.s + 1
    k = sum(r * (dh + 1) for dh in head_dims(d, heads))
    layer = Layer("sum", k, alphabet, levels=2**bits)
    c = np.arange(d)
    h = c % heads
    dims = np.array(head_dims(d, heads), dtype=np.int64)
    offsets = r * (np.concatenate([[0], np.cumsum(dims[:-1])]) + np.arange(heads))
    tables = [offsets[h] + 1 + c // heads, dims[h] + 1, h, offsets, dims]
    aux = np.concatenate([[heads, r, VALUES.index(values), d], *tables]).astype(np.float64)
    # state[0] is the answer; with several heads state[1 + h] is head h's value sum
    return Plan([layer], 1 if heads == 1 else 1 + heads, emit, update, answer, aux=aux)
