"""raw: every token broadcasts its bits; each query solves Min-IP from the transcript.

Correct on every input (it is plain dense comparison), and far above the bound:
``N * 32 * ceil(m / 32)`` bits.
"""

import numpy as np
from numba import njit

from sketchsim.bits import popcount64
from sketchsim.sketch import Layer, Plan, Protocol
from sketchsim.sketch.tokens import chunk32


@njit
def emit(layer, pos, bits, ctx, state, aux, out):
    for c in range((ctx[2] + 31) // 32):
        out[c] = chunk32(bits, c)


@njit
def update(layer, pos, bits, ctx, state, sketch, aux):
    if pos >= ctx[0]:  # only queries answer
        return
    k = (ctx[2] + 31) // 32
    best = np.int64(1) << 62
    for j in range(ctx[3]):
        ip = np.int64(0)
        for c in range(k):
            ip += popcount64(np.uint64(chunk32(bits, c) & sketch[j * k + c]))
        best = min(best, ip)
    state[0] = best


@njit
def answer(pos, bits, ctx, state, aux):
    return state[0]


def setup(ctx, params):
    chunks = (ctx.m + 31) // 32
    return Plan([Layer("concat", chunks, 2**32)], 1, emit, update, answer)


PROTOCOL = Protocol("raw", "every token broadcasts its bits (dense comparison)", setup)
