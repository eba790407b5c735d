"""kv-sum: MQAR lookup through one sum channel with a register per key.

Every data token adds its value (shifted right by ``drop`` bits) into the
register of its key; keys are distinct within an input, so each register holds
exactly one value and query ``i`` reads the register of its own key.  Declared:
``keys * log2(ceil(V / 2^drop))`` bits; with ``keys = q`` and ``drop = 0`` that
is exactly the bound ``q log2 V``, and with ``drop >= 1`` it is below it, so
the protocol must be wrong somewhere (family ``mqar``).
"""

from numba import njit

from sketchsim.sketch import Param, Plan, Protocol
from sketchsim.sketch.packed_tokens import field
from sketchsim.sketch.protocol import Layer


@njit
def emit(layer, pos, bits, ctx, state, aux, out):
    kb, vb, drop = int(aux[0]), int(aux[1]), int(aux[2])
    out[field(bits, 0, kb)] = field(bits, kb, vb) >> drop


@njit
def update(layer, pos, bits, ctx, state, sketch, aux):
    if pos < ctx[0]:
        state[0] = sketch[field(bits, 0, int(aux[0]))] << int(aux[2])


@njit
def answer(pos, bits, ctx, state, aux):
    return state[0]


def setup(ctx, params):
    drop = params["drop"]
    alphabet = (ctx.s >> drop) + 1
    data = tuple(range(ctx.q, ctx.n_tokens))
    layer = Layer("sum", ctx.keys, alphabet, speakers=data, levels=alphabet)
    return Plan([layer], 1, emit, update, answer, aux=[ctx.key_bits, ctx.value_bits, drop])


PROTOCOL = Protocol(
    "kv-sum",
    "MQAR: each data token adds its value into its key's register (drop low value bits)",
    setup,
    params=(Param("drop", "int", 0, "low value bits dropped (>= 1: below the bound)", minimum=0),),
    families=("mqar",),
)
