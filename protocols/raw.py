"""raw: every token broadcasts its bits; each query solves Min-IP from the transcript.

Correct on every input (it is plain dense comparison), and far above the bound:
exactly ``N * m`` bits.  Tokens are sent in fields of ``w`` bits, ``w`` the
largest divisor of ``m`` up to 32, so that the alphabet wastes no bit.

A query keeps its own ``m / w`` fields in ``state[1:]`` (computed once per
update, not once per other token), so that the inner loop is an AND and a
popcount of two int64 loads.
"""

import numpy as np
from numba import njit

from sketchsim.minip.bits import popcount64
from sketchsim.sketch import Layer, Plan, Protocol
from sketchsim.sketch.packed_tokens import field


@njit(cache=True)
def emit(layer, pos, bits, ctx, state, aux, out):
    w = int(aux[0])
    for c in range(ctx[2] // w):
        out[c] = field(bits, c * w, w)


@njit(cache=True)
def update(layer, pos, bits, ctx, state, sketch, aux):
    if pos >= ctx[0]:  # only queries answer
        return
    w = int(aux[0])
    k = ctx[2] // w
    for c in range(k):
        state[1 + c] = field(bits, c * w, w)
    best = np.int64(1) << 62
    for j in range(ctx[3]):
        ip = np.int64(0)
        base = j * k
        for c in range(k):
            ip += popcount64(np.uint64(state[1 + c] & sketch[base + c]))
        best = min(best, ip)
    state[0] = best


@njit(cache=True)
def answer(pos, bits, ctx, state, aux):
    return state[0]


def setup(ctx, params):
    width = max(w for w in range(1, 33) if ctx.m % w == 0)
    k = ctx.m // width
    return Plan([Layer("concat", k, 2**width)], 1 + k, emit, update, answer, aux=[width])


PROTOCOL = Protocol("raw", "every token broadcasts its bits (dense comparison)", setup)
