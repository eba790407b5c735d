"""Small protocols used by the tests (jitted and pure Python)."""

import numpy as np
from numba import njit

from sketchsim.sketch import Layer, Param, Plan, Protocol
from sketchsim.sketch.packed_tokens import count_ones


@njit
def _emit_hash(layer, pos, bits, ctx, state, aux, out):
    # a seeded hash of the token and the state, reduced to the alphabet
    a = int(aux[1 + 2 * layer])
    k = int(aux[2 + 2 * layer])
    h = np.uint64(int(aux[0])) + np.uint64(pos) * np.uint64(0x9E3779B97F4A7C15)
    for w in range(bits.shape[0]):
        h = (h ^ bits[w]) * np.uint64(0x100000001B3)
    h = h ^ np.uint64(state[0])
    for c in range(k):
        h = (h ^ (h >> np.uint64(29))) * np.uint64(0xBF58476D1CE4E5B9) + np.uint64(c)
        out[c] = np.int64(h % np.uint64(a))


@njit
def _update_hash(layer, pos, bits, ctx, state, sketch, aux):
    acc = state[0]
    for e in range(sketch.shape[0]):
        acc = (acc * 31 + sketch[e]) % 1000003
    state[0] = acc


@njit
def _init_hash(pos, bits, ctx, state, aux):
    # a starting state from the token's own bits (the plan's optional init)
    h = np.uint64(int(aux[0])) ^ np.uint64(pos + 1)
    for w in range(bits.shape[0]):
        h = (h ^ bits[w]) * np.uint64(0x100000001B3)
    state[0] = np.int64(h % np.uint64(1000003))


@njit
def _answer_hash(pos, bits, ctx, state, aux):
    return state[0] % (ctx[1] + 1)


CHANNELS = ("sum", "histogram", "concat")


def random_protocol(
    seed: int, layers: list[tuple[str, int, int]], speakers="all", init: bool = False
) -> Protocol:
    """A deterministic 'random' protocol: each layer hashes token and state.

    ``init``: every token starts from a hash of its own bits (else from zero).
    """

    def setup(ctx, params):
        aux = [seed]
        for _, a, k in layers:
            aux += [a, k]
        plan_layers = [Layer(ch, k, a, speakers=speakers) for ch, a, k in layers]
        start = _init_hash if init else None
        return Plan(plan_layers, 1, _emit_hash, _update_hash, _answer_hash, aux=aux, init=start)

    return Protocol(f"random-{seed}", "hash protocol for tests", setup)


@njit
def _emit_bad(layer, pos, bits, ctx, state, aux, out):
    out[0] = ctx[1] + 5 if pos == 1 else 0


BAD = Protocol(
    "bad-symbol",
    "emits a symbol outside its alphabet at token 2",
    lambda ctx, p: Plan([Layer("concat", 1, 2)], 1, _emit_bad, _update_hash, _answer_hash),
)


def _py_emit(layer, pos, bits, ctx, state, aux, out):
    if pos == ctx[3] - 1:
        for i in range(ctx[0]):
            out[i] = count_ones(bits, i * ctx[1], (i + 1) * ctx[1])


def _py_update(layer, pos, bits, ctx, state, sketch, aux):
    if pos < ctx[0]:
        state[0] = sketch[pos]


def _py_answer(pos, bits, ctx, state, aux):
    return state[0]


PY_COUNTS = Protocol(
    "py-counts",
    "block counts, pure Python",
    lambda ctx, p: Plan(
        [Layer("concat", ctx.q, ctx.s + 1, "last")], 1, _py_emit, _py_update, _py_answer
    ),
    params=(Param("unused", "int", 3, "a parameter for parsing tests", minimum=1),),
)
