"""The data token sends its q block counts, each clipped to ``levels`` values.

With ``levels = s + 1`` this is the tightness protocol of THEORY section 5
(exactly ``q log2(s+1)`` bits, correct on F(q, s)); with fewer levels it
declares fewer bits than the bound and must fail.  Query ``i`` reads slot ``i``.
"""

from __future__ import annotations

from numba import njit

from sketchsim.sketch.packed_tokens import count_ones
from sketchsim.sketch.protocol import Layer, Plan

__all__ = ["block_counts_plan"]


@njit(inline="always")
def emit(layer, pos, bits, ctx, state, aux, out):
    q, s = ctx[0], ctx[1]
    top = int(aux[0]) - 1
    for i in range(q):
        out[i] = min(count_ones(bits, i * s, (i + 1) * s), top)


@njit(inline="always")
def update(layer, pos, bits, ctx, state, sketch, aux):
    if pos < ctx[0]:
        state[0] = sketch[pos]


@njit(inline="always")
def answer(pos, bits, ctx, state, aux):
    return state[0]


def block_counts_plan(ctx, levels: int) -> Plan:
    """One concat layer in which only the data token (the last) speaks."""
    layer = Layer("concat", ctx.q, levels, speakers="last")
    return Plan([layer], 1, emit, update, answer, aux=[levels])
