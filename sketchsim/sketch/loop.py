"""The engine's inner loop, as source that is compiled once per protocol.

:func:`loop` runs inputs ``lo..hi`` of a batch through every layer of a plan,
in one function (a per-input function inlined into it cost numba a third more
compilation, issue #31).  The protocol's functions are not arguments: the
engine (:mod:`sketchsim.sketch.engine`) compiles this code object with
``_emit``, ``_update``, ``_answer`` and ``_init`` bound as globals, or
:mod:`sketchsim.sketch.engine_cache` writes this source into a generated module
that numba caches on disk (:func:`compiled` builds the former).  The loop never
runs as plain Python.
"""

from __future__ import annotations

from types import FunctionType

import numpy as np
from numba import carray, njit, types
from numba.extending import intrinsic

from sketchsim.sketch.fingerprint import SEED1, SEED2, fold

__all__ = [
    "loop",
    "no_init",
    "copy_start",
    "compiled",
    "uses_init",
    "GLOBALS",
    "ROLES",
    "channel_write",
    "unowned",
    "data_pointer",
    "inlined",
    "INLINE_BYTECODE",
]

# ``loop`` refers to the protocol's functions as the globals ``_emit``,
# ``_update``, ``_answer`` and ``_init`` (:func:`no_init` for a plan without one):
# the engine binds them either by rebinding the
# globals of this very code object (any plug-in), or by writing this source into
# a small generated module that numba caches on disk (the protocols shipped with
# sketchsim; see :mod:`sketchsim.sketch.engine_cache`).
#
# ``layers`` is an int64 table with one row per layer:
# ``[channel code, symbols k, alphabet a, levels, first entry, end entry]``
# (entries of the concatenated transcript); ``sizes`` is
# ``[state size, largest k, transcript length]``; ``outputs`` is the tuple
# ``(transcripts, fingerprints, answers, errors)``.  The hot loops take indices
# and scalars; the only views made are the arguments the plug-in API defines.
_emit = _update = _answer = _init = None  # bound per protocol
_has_init = False  # bound per protocol: ``_init`` is the plan's (a compile-time constant)
#: The function globals above, and the roles of the functions bound to them (:func:`inlined`).
GLOBALS = ("_emit", "_update", "_answer", "_init")
ROLES = ("emit", "update", "answer", "init")


#: A built-in protocol function with at most this many bytes of Python bytecode is
#: inlined into the loop (:func:`inlined`); larger ones are called.  ``update`` and
#: ``answer`` run for every token of every input; ``init``, and ``emit`` at layer 0,
#: only for the tokens that are not shared by every input (the loop runs those once
#: per call); ``emit`` at later layers for every speaker.
INLINE_BYTECODE = {"emit": 600, "update": 2000, "answer": 600, "init": 600}


@njit(cache=True)
def copy_start(dst, src, n):
    """``dst[:n] = src[:n]`` (rows): the shared tokens' starting states, kept or restored."""
    for pos in range(n):
        for e in range(dst.shape[1]):
            dst[pos, e] = src[pos, e]


@njit(cache=True)
def no_init(pos, bits, ctx, state, aux):
    """The ``init`` of a plan without one: every token starts from a zero state."""
    return None


def inlined(fn, role: str):
    """``fn`` as the loop should bind it: inlined when small, else ``fn`` itself (called).

    ``role``: ``"emit"``, ``"update"``, ``"answer"`` or ``"init"`` (:data:`INLINE_BYTECODE`).
    A call passes every array argument as a struct and keeps the callee's
    loop-invariant work (``aux`` reads) inside the loop; inlined, numba and LLVM
    optimise the protocol's code together with the loop, at some compilation time
    (the thresholds' measurements are in docs/benchmarks.md).  Same results either
    way: the same integer and IEEE float operations in the same order.
    """
    py = getattr(fn, "py_func", None)
    if py is None or len(py.__code__.co_code) > INLINE_BYTECODE[role]:
        return fn
    return njit(inline="always")(py)


def compiled(funcs, inline: bool, code=None, **extra):
    """:func:`loop` compiled in memory with ``funcs`` (emit, update, answer, init) bound.

    ``inline``: pass each through :func:`inlined` (sketchsim's own functions).
    ``code``: another code object to compile in place of :func:`loop`'s (the
    benchmarks compare another checkout's loop).
    ``extra``: more globals to rebind (the benchmarks swap ``fold``).
    ``_has_init`` is derived here, from ``init`` being :func:`no_init` or not.
    """
    g = {**globals(), "_has_init": uses_init(funcs[3]), **extra}
    if inline:
        funcs = tuple(inlined(f, role) for f, role in zip(funcs, ROLES, strict=True))
    g.update(zip(GLOBALS, funcs, strict=True))
    return njit(nogil=True)(FunctionType(code or loop.__code__, g, "loop"))


def uses_init(init) -> bool:
    """Whether ``init`` is a plan's own (the loop's ``_has_init``), not :func:`no_init`."""
    return init is not no_init


@intrinsic
def data_pointer(typingctx, arr):
    """The data pointer of a contiguous array (for :func:`unowned`)."""
    sig = types.CPointer(arr.dtype)(arr)

    def codegen(context, builder, signature, args):
        return context.make_array(signature.args[0])(context, builder, args[0]).data

    return sig, codegen


@njit(inline="always")
def unowned(a):
    """A view of C-contiguous ``a`` without a reference count; ``a`` must outlive it."""
    return carray(data_pointer(a), a.shape)


@njit(inline="always")
def channel_write(chan, k, a, lo, spoken, sym, sk):
    """Write one speaker's ``k`` symbols ``sym`` into the sketch ``sk`` (layer from ``lo``).

    ``spoken``: speakers of this layer before this one (the concat channel's slot).
    Returns -1, or the first slot whose symbol is outside ``0..a-1`` (nothing
    written then on the count channel).
    """
    ua, uk, ulo = np.uint64(a), np.uint64(k), np.uint64(lo)
    # the largest symbol as unsigned: a negative one shows as huge
    worst = np.uint64(0)
    if chan == 0:
        for c in range(uk):
            v = sym[c]
            worst = max(worst, np.uint64(v))
            sk[ulo + c] += v
    elif chan == 2:
        base = ulo + np.uint64(spoken) * uk
        for c in range(uk):
            v = sym[c]
            worst = max(worst, np.uint64(v))
            sk[base + c] = v
    else:
        for c in range(uk):
            worst = max(worst, np.uint64(sym[c]))
        if worst < ua:
            for c in range(k):
                sk[lo + c * a + sym[c]] += 1
    if worst >= ua:
        for c in range(k):
            if np.uint64(sym[c]) >= ua:
                return c
    return -1


def loop(lo, hi, tokens, fixed, ctx, aux, layers, speak, sizes, queries, store, outputs):
    state_size, kmax, total_len = sizes[0], sizes[1], sizes[2]
    transcripts, fingerprints, answers, errors = outputs
    nf = fixed.shape[0]
    N = nf + tokens.shape[1]
    state_mem = np.zeros((N, state_size), dtype=np.int64)
    start_mem = np.zeros((max(1, nf) if _has_init else 1, state_size), dtype=np.int64)
    sym_mem = np.zeros(max(1, kmax), dtype=np.int64)
    sk_mem = np.zeros(max(1, total_len), dtype=np.int64)
    pre_mem = np.zeros(max(1, total_len), dtype=np.int64)
    # Views of these carry no reference count (they outlive the loop): the per-call
    # views tokens[b, pos], state[pos] cost no atomic increments and decrements.
    tk = unowned(tokens)
    fx = unowned(fixed)
    state = unowned(state_mem)
    start = unowned(start_mem)
    sym = unowned(sym_mem)
    sk = unowned(sk_mem)
    pre = unowned(pre_mem)
    # A token's starting state is init's function of its own input, and layer 0's
    # fixed speakers say the same in every input: emit and init are functions of
    # their arguments (the contract, checked by the engine's determinism pass), and
    # emit does not write its state.  So the fixed tokens' starting states are made
    # once, into ``start``, and their layer-0 symbols emitted once, into ``pre``; the
    # sums and counts are integer additions, so the order does not change a bit.
    if _has_init:
        for pos in range(nf):
            _init(pos, fx[pos], ctx, state[pos], aux)
        copy_start(start, state, nf)
    npre = 0
    # Per input.  Inner loops run over unsigned indices: numba then emits no
    # negative-index wraparound, and LLVM vectorises them (about 4x on the sum
    # channel).  Token ``pos`` is ``fixed[pos]`` (shared by every input) below ``nf``,
    # else ``tokens[b, pos - nf]``; layer 0 starts from ``pre``.  The first pass,
    # ``b = lo - 1``, is the fixed tokens' layer 0 into ``pre``: one site of
    # ``_emit`` and ``channel_write`` serves both (each inlined site costs numba
    # about 0.3 s of compilation, issue #31).
    for b in range(lo - 1, hi):
        fixed_pass = b < lo
        if fixed_pass and layers.shape[0] == 0:
            continue
        if not fixed_pass:
            state[:, :] = 0
            # _has_init is a compile-time constant: a plan without init gets none of
            # this (a flat view of the state for the copy made raw 5% slower, even so)
            if _has_init:
                copy_start(state, start, nf)
                for pos in range(nf, N):
                    _init(pos, tk[b, pos - nf], ctx, state[pos], aux)
        h1 = np.uint64(SEED1)
        h2 = np.uint64(SEED2)
        failed = False
        for lay in range(layers.shape[0]):
            chan, k, a = layers[lay, 0], layers[lay, 1], layers[lay, 2]
            levels, lo_e, hi_e = layers[lay, 3], layers[lay, 4], layers[lay, 5]
            uk, ulo, uhi = np.uint64(k), np.uint64(lo_e), np.uint64(hi_e)
            first = 0
            last = N
            spoken = 0
            if fixed_pass:
                last = nf
                for e in range(ulo, uhi):
                    sk[e] = 0
            elif lay == 0:
                for e in range(ulo, uhi):
                    sk[e] = pre[e]
                first = nf
                spoken = npre
            else:
                for e in range(ulo, uhi):
                    sk[e] = 0
            for pos in range(first, last):
                if not speak[lay, pos]:
                    continue
                for c in range(uk):
                    sym[c] = 0
                bits = fx[pos] if pos < nf else tk[b, pos - nf]
                _emit(lay, pos, bits, ctx, state[pos], aux, sym)
                c = channel_write(chan, k, a, lo_e, spoken, sym, sk)
                if c >= 0:  # this input stops: report the first bad slot (a fixed
                    # token's stops every input, as it would each on its own)
                    first_b = lo if fixed_pass else b
                    end_b = hi if fixed_pass else b + 1
                    for i in range(first_b, end_b):
                        errors[i, 0] = 1
                        errors[i, 1] = lay
                        errors[i, 2] = pos
                        errors[i, 3] = sym[c]
                        errors[i, 4] = c
                    failed = True
                    break
                spoken += 1
            if fixed_pass:
                npre = spoken
                for e in range(ulo, uhi):
                    pre[e] = sk[e]
                break
            if failed:
                break
            if chan == 0 and levels > 0:
                for e in range(ulo, uhi):
                    sk[e] = min(sk[e], levels - 1)
            for e in range(ulo, uhi):
                h1, h2 = fold(h1, h2, e, sk[e])
            layer_sketch = sk[lo_e:hi_e]
            for pos in range(N):
                bits = fx[pos] if pos < nf else tk[b, pos - nf]
                _update(lay, pos, bits, ctx, state[pos], layer_sketch, aux)
        if fixed_pass and failed:
            return 0
        if failed or fixed_pass:
            continue
        fingerprints[b, 0] = h1
        fingerprints[b, 1] = h2
        if store:
            for e in range(np.uint64(transcripts.shape[1])):
                transcripts[b, e] = sk[e]
        for i in range(queries.shape[0]):
            p = queries[i]
            bits = fx[p] if p < nf else tk[b, p - nf]
            answers[b, i] = _answer(p, bits, ctx, state[p], aux)
    # Numba frees a variable after its last use: without this use the owners of
    # the unowned views above were freed before the loop (a use-after-free that
    # crashed once the buffers were large enough to be unmapped on free).
    return (
        state_mem.shape[0]
        + start_mem.shape[0]
        + sym_mem.shape[0]
        + sk_mem.shape[0]
        + pre_mem.shape[0]
        + tokens.size
        + fixed.size
    )
