"""clipped-counts: block counts clipped to fewer than s+1 levels.

Declares ``q log2(levels)`` bits; with ``levels <= s`` that is below the bound,
so the protocol must be wrong somewhere on F(q, s).
"""

from numba import njit

from sketchsim.sketch import Layer, Param, Plan, Protocol
from sketchsim.sketch.tokens import count_ones


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


def setup(ctx, params):
    levels = params["levels"] or ctx.s  # 0: one level fewer than the answers need
    layer = Layer("concat", ctx.q, levels, speakers="last")
    return Plan([layer], 1, emit, update, answer, aux=[levels])


PROTOCOL = Protocol(
    "clipped-counts",
    "block counts clipped to fewer levels: below the bound, must fail",
    setup,
    params=(Param("levels", "int", 0, "levels per count (0: s)", minimum=0),),
)
