"""block-counts: the data token sends its q block counts (THEORY section 5, tightness).

Exactly ``q log2(s+1)`` bits, and correct on F(q, s).
"""

from numba import njit

from sketchsim.sketch import Layer, Plan, Protocol
from sketchsim.sketch.tokens import count_ones


@njit(inline="always")
def emit(layer, pos, bits, ctx, state, aux, out):
    q, s = ctx[0], ctx[1]
    for i in range(q):
        out[i] = count_ones(bits, i * s, (i + 1) * s)


@njit(inline="always")
def update(layer, pos, bits, ctx, state, sketch, aux):
    if pos < ctx[0]:
        state[0] = sketch[pos]


@njit(inline="always")
def answer(pos, bits, ctx, state, aux):
    return state[0]


def setup(ctx, params):
    return Plan([Layer("concat", ctx.q, ctx.s + 1, speakers="last")], 1, emit, update, answer)


PROTOCOL = Protocol(
    "block-counts", "the data token sends its q block counts: exactly at the bound", setup
)
