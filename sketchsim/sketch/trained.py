"""Trained kernel-attention models as sketch protocols: the engine side.

A model of a weights file (:mod:`sketchsim.sketch.weights_file`: ``L`` layers
of ``H`` heads, feature rank ``r``, value width ``d``, token width ``m``, and
its calibration) runs in the engine as the ``trained`` protocol.

**Fixed point.** Entry ``e`` of a head's state is a ``K``-bit register.  Token
``j`` contributes ``c_j`` (``phi_K(u_j)_k v(u_j)_c``, or ``phi_K(u_j)_k`` for
``z``) and emits the symbol ``clip(round((c_j - lo_e) / step_e), 0, 2^K - 1)``
with ``step_e = span_e / (2^K - 1)``; the ``sum`` channel adds the symbols and
saturates at ``2^K - 1``; readers decode ``step_e * register + N lo_e``.
``lo_e`` (the smallest contribution of any token) and ``span_e`` (the largest
register value ``sum_j (c_j - lo_e)`` of any input) are measured on the
training inputs and stored with the weights, so a layer declares
``H E K`` bits, like the ``kernel`` protocol (docs/theory.md, "Trained models").
"""

from __future__ import annotations

import numpy as np
from numba import njit

from sketchsim.errors import PluginError
from sketchsim.sketch.activations import feature
from sketchsim.sketch.contract import check_engine_size
from sketchsim.sketch.protocol import Layer, Plan
from sketchsim.sketch.registers import answer_of, register, register_steps
from sketchsim.sketch.weights_file import (
    FEATURE_MAPS,
    HEAD_ARRAYS,
    MAX_BITS,
    Weights,
    head_entries,
    load_weights,
    save_weights_file,
)

__all__ = [
    "trained_plan",
    "trained_engine",
    "family_difference",
    # the weights file's, re-exported: plug-ins and scripts import them from here
    "Weights",
    "load_weights",
    "save_weights_file",
    "head_entries",
]


# ---------------------------------------------------------------------------------------
# aux layout: a header of _HDR numbers, then one block of P numbers per (layer, head),
# then wb (m) and bb (1).  Block: wq wk (r m each) bq bk (r) wv wa (d m) bv ba (d)
# wu (m d), lo step (E); the matrices stored transposed, column after column (:func:`_affine`).
# Offsets inside a block are computed where they are read (``o_wv``, ``o_wu``, ...).
_HDR = 12


def _block_size(r: int, d: int, m: int, E: int) -> int:
    return 2 * (r * m + r) + 2 * (d * m + d) + m * d + 2 * E


def _aux(w: Weights, bits: int) -> np.ndarray:
    a = w.arch
    L, H, r, d, m = a["layers"], a["heads"], a["rank"], a["value_width"], a["m"]
    E = w.entries()
    top = float(2**bits - 1)
    hdr = [
        L,
        H,
        r,
        d,
        m,
        FEATURE_MAPS.index(a["feature_map"]),
        E,
        _block_size(r, d, m, E),
        a["eps"],
        top,
        0.0,
        0.0,
    ]
    parts = [np.array(hdr, dtype=np.float64)]
    for l in range(L):
        for h in range(H):
            g = {k: w.arrays[f"L{l}.H{h}.{k}"] for k in HEAD_ARRAYS}
            step = register_steps(g["span"], bits)
            parts += [
                g["wq"].T.ravel(),
                g["wk"].T.ravel(),
                g["bq"],
                g["bk"],
                g["wv"].T.ravel(),
                g["wa"].T.ravel(),
                g["bv"],
                g["ba"],
                g["wu"].T.ravel(),
                g["lo"],
                step,
            ]
    parts += [w.arrays["wb"], w.arrays["bb"]]
    return np.concatenate(parts)


@njit(inline="always")
def _dims(aux):
    return (
        int(aux[0]),
        int(aux[1]),
        int(aux[2]),
        int(aux[3]),
        int(aux[4]),
        int(aux[5]),
        int(aux[6]),
        int(aux[7]),
    )


@njit(cache=True)
def _affine(aux, w_off, b_off, rows, m, f, src, dst, act):
    """``f[dst + k] = act(sum_i W[k, i] f[src + i] + b[k])`` (``act < 0``: no activation).

    ``W`` is stored transposed (``W[k, i]`` at ``w_off + i rows + k``), so that eight
    rows at a time read eight adjacent weights per ``i`` (unsigned indices: no
    wraparound test between the loads) and keep eight independent sums in flight.
    (numba leaves them scalar; the gain over four rows of the untransposed matrix is
    in docs/benchmarks.md.)  Each row still adds its terms in the
    order ``b, i = 0, 1, ...``, so every float is the one of a row-by-row loop.
    """
    k = 0
    o1, o2, o3, o4 = np.uint64(1), np.uint64(2), np.uint64(3), np.uint64(4)
    o5, o6, o7 = np.uint64(5), np.uint64(6), np.uint64(7)
    while k + 8 <= rows:
        z0, z1, z2, z3 = aux[b_off + k], aux[b_off + k + 1], aux[b_off + k + 2], aux[b_off + k + 3]
        z4, z5, z6, z7 = (
            aux[b_off + k + 4],
            aux[b_off + k + 5],
            aux[b_off + k + 6],
            aux[b_off + k + 7],
        )
        w = np.uint64(w_off + k)
        for i in range(m):
            ui = f[src + i]
            z0 += aux[w] * ui
            z1 += aux[w + o1] * ui
            z2 += aux[w + o2] * ui
            z3 += aux[w + o3] * ui
            z4 += aux[w + o4] * ui
            z5 += aux[w + o5] * ui
            z6 += aux[w + o6] * ui
            z7 += aux[w + o7] * ui
            w += np.uint64(rows)
        f[dst + k], f[dst + k + 1], f[dst + k + 2], f[dst + k + 3] = z0, z1, z2, z3
        f[dst + k + 4], f[dst + k + 5], f[dst + k + 6], f[dst + k + 7] = z4, z5, z6, z7
        k += 8
    while k < rows:
        z = aux[b_off + k]
        for i in range(m):
            z += aux[w_off + i * rows + k] * f[src + i]
        f[dst + k] = z
        k += 1
    if act >= 0:
        for k in range(rows):
            f[dst + k] = feature(f[dst + k], act)


# A token's state (floats in int64 words): the ``L H E`` sketch entries decoded
# (``update``), then what ``init`` computes from the token's own bits once: the output bias term
# ``<wb, u^0> + bb`` and, per head, layer 0's query features and readout (``r + d``);
# then, with several layers, answer's float scratch of ``2 (m + r + d)``.


@njit(inline="always")
def _cache(aux):
    """Offset in the state of the token's ``init`` cache (bias term, then per head ``r + d``)."""
    return int(aux[0]) * int(aux[1]) * int(aux[6])


@njit(inline="always")
def _cached(pos, ctx, aux):
    """Whether ``init`` fills the cache of token ``pos``: every query; with several layers,
    every token (``emit`` of the later layers runs layer 0 for each speaker)."""
    return int(aux[0]) > 1 or pos < ctx[0]


@njit(inline="always")
def _scratch(state, aux):
    """``init``'s and ``answer``'s float scratch (:func:`_forward`) with several layers: the
    token's state after the sketch entries and the cache, written before it is read.  With
    one layer the state has none (``answer`` reads only the cache and the sketches, and
    the engine copies every state into every input: a small state is a fast one); ``init``
    then allocates its scratch, as ``emit``, which may not write the state, always does."""
    H, r, d = int(aux[1]), int(aux[2]), int(aux[3])
    return state[_cache(aux) + 1 + H * (r + d) :].view(np.float64)


@njit(cache=True)
def _unpack(bits, m, f):
    """``f[:m] = u^0 = 2 x - 1`` from the packed token."""
    for i in range(m):
        f[i] = 2.0 * float((bits[i >> 6] >> np.uint64(i & 63)) & np.uint64(1)) - 1.0


@njit(cache=True)
def _bias(aux, L, H, P, m, f):
    """The output bias term ``<wb, u^0> + bb`` (``u^0`` in ``f[:m]``)."""
    base = _HDR + L * H * P
    y = aux[base + m]
    for i in range(m):
        y += aux[base + i] * f[i]
    return y


@njit(inline="always")
def _query_side(aux, head_base, r, d, m, act, f):
    """One head's query features and readout of ``f[:m]``, into ``f[2m : 2m + r + d]``
    (``head_base``: the head's first aux entry)."""
    o_wv = head_base + 2 * r * m + 2 * r
    o_bv = o_wv + 2 * d * m
    _affine(aux, head_base, head_base + 2 * r * m, r, m, f, 0, 2 * m, act)
    _affine(aux, o_wv + d * m, o_bv + d, d, m, f, 0, 2 * m + r, -1)


@njit(inline="always")
def _head_readout(
    y,
    aux,
    head_base,
    sketch_values,
    state_offset,
    query_array,
    query_offset,
    r,
    d,
    m,
    act,
    eps,
    N,
    f,
    residual,
):
    """``y`` plus one head's ``<a(u), o>``, its query features and readout at
    ``query_array[query_offset:]``.

    ``head_base``: the head's first aux entry; ``sketch_values[state_offset:]``: its
    decoded state (:func:`update`), ``r`` rows of ``width`` entries (``d`` products,
    then the key feature itself unless ``act`` is the signed map).  ``residual``: also
    add ``W_u o`` to ``delta`` (``f[m : 2m]``).  Every sum adds its terms in the order
    of the model's definition.  Unsigned indices: numba then tests no index for
    wraparound, which made this readout over 2x slower.
    """
    state_offset = np.uint64(state_offset)
    features = np.uint64(query_offset)
    rank, width_d, width_m = np.uint64(r), np.uint64(d), np.uint64(m)
    row_width = width_d if act == 2 else width_d + np.uint64(1)
    denominator = eps if act != 2 else N
    if act != 2:
        for k in range(rank):
            denominator += (
                query_array[features + k] * sketch_values[state_offset + k * row_width + width_d]
            )
    readout = features + rank
    o_wu = np.uint64(head_base + 2 * r * m + 2 * r + 2 * d * m + 2 * d)
    for c in range(width_d):
        numerator = 0.0
        for k in range(rank):
            numerator += query_array[features + k] * sketch_values[state_offset + k * row_width + c]
        head_out = numerator / denominator
        y += query_array[readout + c] * head_out
        if residual:
            w = o_wu + c * width_m  # W_u stored transposed: row c is head_out's
            for i in range(width_m):
                f[width_m + i] += aux[w + i] * head_out
    return y


@njit(cache=True)
def _forward(upto, bits, ctx, state, aux, f, cached):
    """Run layers ``0..upto-1`` for one token from its bits and the stored sketches.

    ``f``: float scratch of ``2 (m + r + d)``: ``u`` (``m``), ``delta`` (``m``), then
    blocks of ``r`` and ``d`` (query or key features, readout or values).  Leaves
    the token's residual stream in ``f[:m]`` and returns its output ``y`` (the
    readouts of those layers, plus the output bias when ``upto`` is all layers;
    then the last layer's residual update, which no output reads, is skipped).
    ``cached``: the bias term and layer 0's query side are read from the token's
    ``init`` cache in ``state`` (the same floats, computed once per token).
    """
    L, H, r, d, m, act, E, P = _dims(aux)
    eps = aux[8]
    N = float(ctx[3])
    delta, features = m, 2 * m  # offsets in f
    state_floats = state.view(np.float64)
    cache_offset = _cache(aux)
    _unpack(bits, m, f)
    y = 0.0
    if upto == L:
        y = state_floats[cache_offset] if cached else _bias(aux, L, H, P, m, f)
    for lay in range(upto):
        residual = lay < upto - 1 or upto < L
        if residual:
            for i in range(m):
                f[delta + i] = 0.0
        for h in range(H):
            head_base = _HDR + (lay * H + h) * P
            if cached and lay == 0:  # read in place from the cache
                query_array, query_offset = state_floats, cache_offset + 1 + h * (r + d)
            else:
                _query_side(aux, head_base, r, d, m, act, f)
                query_array, query_offset = f, features
            state_offset = (lay * H + h) * E
            y = _head_readout(
                y, aux, head_base, state_floats, state_offset, query_array, query_offset,
                r, d, m, act, eps, N, f, residual,
            )  # fmt: skip
        if residual:
            for i in range(m):
                f[i] += f[delta + i]
    return y


@njit(cache=True)
def init(pos, bits, ctx, state, aux):
    """The token's cache (:func:`_cached` tokens): its bias term and layer 0's query side."""
    if not _cached(pos, ctx, aux):
        return
    L, H, r, d, m, act, E, P = _dims(aux)
    state_floats = state.view(np.float64)
    cache_offset = _cache(aux)
    f = _scratch(state, aux) if L > 1 else np.empty(2 * (m + r + d))
    _unpack(bits, m, f)
    state_floats[cache_offset] = _bias(aux, L, H, P, m, f)
    for h in range(H):
        _query_side(aux, _HDR + h * P, r, d, m, act, f)
        head_cache = cache_offset + 1 + h * (r + d)
        for k in range(r + d):
            state_floats[head_cache + k] = f[2 * m + k]


@njit(cache=True)
def emit(layer, pos, bits, ctx, state, aux, out):
    L, H, r, d, m, act, E, P = _dims(aux)
    top = aux[9]
    f = np.empty(2 * (m + r + d))
    _forward(layer, bits, ctx, state, aux, f, _cached(pos, ctx, aux))
    keys, values = 2 * m, 2 * m + r  # offsets in f
    width = d if act == 2 else d + 1
    for h in range(H):
        head_base = _HDR + (layer * H + h) * P
        o_wv = head_base + 2 * r * m + 2 * r
        o_lo = o_wv + 2 * d * m + 2 * d + m * d
        o_step = o_lo + E
        _affine(aux, head_base + r * m, head_base + 2 * r * m + r, r, m, f, 0, keys, act)
        _affine(aux, o_wv, o_wv + 2 * d * m, d, m, f, 0, values, -1)
        for k in range(r):
            for c in range(width):
                x = f[keys + k] * f[values + c] if c < d else f[keys + k]
                e = k * width + c
                code, _ = register(x, aux[o_lo + e], aux[o_step + e], top)
                out[h * E + e] = int(code)


@njit(cache=True)
def update(layer, pos, bits, ctx, state, sketch, aux):
    """Store the layer's sketch decoded, entry ``e`` of a head as ``step_e register + N lo_e``
    (a float in the integer state), once per token rather than once per reading of it.
    The last layer's is read only by the queries' ``answer``: the other tokens skip it."""
    L, H, r, d, m, act, E, P = _dims(aux)
    if layer == L - 1 and pos >= ctx[0]:
        return
    N = float(ctx[3])
    state_floats = state.view(np.float64)
    for h in range(H):
        o_lo = np.uint64(_HDR + (layer * H + h) * P + 2 * r * m + 2 * r + 2 * d * m + 2 * d + m * d)
        o_step = o_lo + np.uint64(E)
        state_offset, sketch_offset = np.uint64((layer * H + h) * E), np.uint64(h * E)
        for e in range(np.uint64(E)):
            state_floats[state_offset + e] = (
                aux[o_step + e] * sketch[sketch_offset + e] + N * aux[o_lo + e]
            )


@njit(inline="always")
def _cached_output(ctx, state, aux):
    """A query's output with one layer: its cached bias term and readout of its cache."""
    L, H, r, d, m, act, E, P = _dims(aux)
    state_floats = state.view(np.float64)
    cache_offset = _cache(aux)
    eps, N = aux[8], float(ctx[3])
    y = state_floats[cache_offset]
    for h in range(H):
        head_base, query_offset = _HDR + h * P, cache_offset + 1 + h * (r + d)
        y = _head_readout(
            y, aux, head_base, state_floats, h * E, state_floats, query_offset,
            r, d, m, act, eps, N, state_floats, False,
        )  # fmt: skip
    return y


@njit(cache=True)
def answer(pos, bits, ctx, state, aux):
    if int(aux[0]) == 1:  # every query is cached
        y = _cached_output(ctx, state, aux)
    else:
        y = _forward(
            int(aux[0]), bits, ctx, state, aux, _scratch(state, aux), _cached(pos, ctx, aux)
        )
    return answer_of(y, ctx[1])


def family_difference(weights: Weights, family) -> str:
    """What differs between the family ``weights`` was trained on and ``family`` (its
    name, seed or options), in words; ``""`` when nothing does.

    The engine's :class:`~sketchsim.sketch.protocol.Context` holds only q, s and m, which
    :func:`trained_plan` checks: a model trained on one seed's bit layout would run on
    another's unnoticed, inputs it never saw the like of.  The header's fields are shown
    through ``ascii`` (they are checked for type, not content).
    """
    import json

    fam = weights.family
    mine = json.loads(json.dumps(family.options(), default=str))
    differ = [
        f"{key} {ascii(have)[:60]} (this run: {ascii(want)[:60]})"
        for key, have, want in (
            ("name", fam["name"], family.name),
            ("seed", fam["seed"], family.seed),
            ("options", fam.get("options", {}), mine),
        )
        if have != want
    ]
    return "; ".join(differ)


def trained_plan(ctx, weights: Weights, bits: int, rounding: str = "every") -> Plan:
    """The plan of a saved model on a family with context ``ctx`` at ``bits`` bits per entry.

    ``rounding`` (causal models): ``every`` state update rounded to its register, or
    only the transcript at the ``cut`` (:data:`sketchsim.sketch.causal.ROUNDINGS`).

    Raises
    ------
    PluginError
        ``bits`` outside ``1..MAX_BITS``, a model trained for another family size, or
        ``rounding=cut`` for a kernel model (its registers are its sum channel's).
    """
    if not 1 <= bits <= MAX_BITS:
        raise PluginError(f"bits must be in 1..{MAX_BITS}, got {bits}", param="bits")
    from sketchsim.sketch.causal import ROUNDINGS

    if rounding not in ROUNDINGS:
        raise PluginError(f"rounding must be every or cut, got {rounding!r}", param="rounding")
    if rounding == "cut" and not weights.causal:
        raise PluginError(
            "rounding=cut applies to causal models; a kernel model's tokens send rounded "
            "symbols, its transcript already",
            param="rounding",
        )
    a, fam = weights.arch, weights.family
    have, want = (fam["q"], fam["s"], a["m"]), (ctx.q, ctx.s, ctx.m)
    if have != want:
        differ = ", ".join(
            f"{name}={x} (this family: {y})"
            for name, x, y in zip(("q", "s", "token bits m"), have, want, strict=True)
            if x != y
        )
        raise PluginError(
            f"{weights.path} was trained for {fam['name']} q={fam['q']}, s={fam['s']}; "
            f"it differs in {differ}"
        )
    if weights.causal:
        from sketchsim.sketch.causal import causal_plan

        return causal_plan(ctx, weights, bits, rounding)
    L, H, E = a["layers"], a["heads"], weights.entries()
    r, d, m = a["rank"], a["value_width"], a["m"]
    # per token: its copies of the L layers' sketches, init's cache, the float scratch
    state = L * H * E + 1 + H * (r + d) + (2 * (m + r + d) if L > 1 else 0)
    check_engine_size(ctx.n_tokens * state + H * E * (L + 1), what=f"{L} x {H} x {E} entries")
    layers = [Layer("sum", H * E, 2**bits, levels=2**bits) for _ in range(L)]
    return Plan(layers, state, emit, update, answer, aux=_aux(weights, bits), init=init)


def trained_engine(
    ctx, weights: Weights, bits: int, name: str = "trained", rounding: str = "every"
):
    """The engine of :func:`trained_plan` as the ``trained`` protocol runs it.

    The plan's functions are sketchsim's own (tested by its suite), so the engine
    uses its cached, inlined loop without the bounds-checked first pass, as for
    every protocol shipped with sketchsim; a plan built by hand and handed to
    :class:`~sketchsim.sketch.engine.Engine` is compiled as a plug-in's instead
    (checked copies, compiled in every new process).
    """
    from sketchsim.sketch.engine import Engine

    plan = trained_plan(ctx, weights, bits, rounding)
    plan.builtin = True
    return Engine(plan, ctx, name)
