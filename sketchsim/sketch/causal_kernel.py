"""The jitted runner of causal models (docs/theory.md 5.3; layout: :mod:`sketchsim.sketch.causal`).

Per input: the tokens in causal order pass each head's state from one to the
next; after every update each state entry is rounded to its ``K``-bit register
(:func:`_quantize`); the registers after the last data token are the transcript
(fingerprinted like the engine's), and each query's output is rounded to its
answer.  With ``rounding=cut`` (``dims[13] == 1``) only the transcript is rounded:
the state is exact before the cut and after it, and after the last data token
every entry is rounded to its register (docs/theory.md 5.3).  ``tests/naive.py``
(``causal_outputs``) is the plain reference.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from sketchsim.sketch.activations import feature, softplus
from sketchsim.sketch.fingerprint import SEED1, SEED2, fold
from sketchsim.sketch.kinds import KINDS
from sketchsim.sketch.registers import answer_of, register

__all__ = ["run_batch"]

# offsets of a head's arrays in its aux block (sketchsim.sketch.causal._BLOCK)
_WQ, _BQ, _WK, _BK, _WV, _BV, _WA, _BA, _WU = 0, 1, 2, 3, 4, 5, 6, 7, 8
_WG, _BG, _WBETA, _BBETA, _ALOG, _DSKIP, _LO, _STEP, _DECAY = 9, 10, 11, 12, 13, 14, 15, 16, 17
_NB = 19  # entries per head in the offsets table (18 arrays and the block's end)
# kind codes: each kind's place in the registry (sketchsim.sketch.kinds.KINDS), read from it
LINEAR, BASED, GLA, DELTA, GATED_DELTA, MAMBA, WINDOW, RETENTION = (
    KINDS.index(k) for k in ("linear", "based", "gla", "deltanet", "gated-deltanet", "mamba",
                             "window", "retention")
)  # fmt: skip


def run_batch(tokens, order, dims, offs, aux, eps: float, store: bool):
    """``(fingerprints, answers, transcripts or None)`` of packed ``tokens`` (B, n, words).

    ``tokens`` in the family's order (queries first); ``order``: the causal order of
    positions (:func:`sketchsim.sketch.causal.causal_order`).
    """
    tokens = np.ascontiguousarray(tokens, dtype=np.uint64)
    B = tokens.shape[0]
    L, H, E, q = int(dims[0]), int(dims[1]), int(dims[7]), int(dims[10])
    fp = np.zeros((B, 2), dtype=np.uint64)
    ans = np.zeros((B, q), dtype=np.int64)
    tr = np.zeros((B if store else 1, L * H * E), dtype=np.int64)
    shared = bool(B) and bool((tokens[:, :q] == tokens[:1, :q]).all())
    _loop(tokens, order, dims, offs, aux, eps, store, fp, ans, tr, shared)
    return fp, ans, (tr if store else None)


@njit(inline="always")
def _sigmoid(z):
    if z >= 0.0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


@njit(inline="always")
def _affine(aux, w, b, rows, m, u, out, o0):
    """``out[o0 + k] = sum_i W[k, i] u[i] + b[k]`` (``W`` row-major ``rows x m`` at ``aux[w]``)."""
    for k in range(rows):
        z = aux[b + k]
        base = w + k * m
        for i in range(m):
            z += aux[base + i] * u[i]
        out[o0 + k] = z


@njit(inline="always")
def _layout(kind, r, d):
    """Offsets in the scratch ``f``: the projection block (what :func:`_project` writes:
    raw ``q``, ``k`` (``r``), ``v``, ``a`` (``d``), the gates' raw values (``max(r, d) + 2``)),
    then the features ``phi(q)``, ``phi(k)`` (``D`` each), ``o`` (``d``) and a window's
    weights.  Returns ``(RQ, RK, V, A, G, FQ, FK, O, P, block)``."""
    D = 1 + r + r * r if kind == BASED else r
    RQ, RK, V, A, G = 0, r, 2 * r, 2 * r + d, 2 * r + 2 * d
    block = G + max(r, d) + 2
    FQ, FK = block, block + D
    O = FK + D
    return RQ, RK, V, A, G, FQ, FK, O, O + d, block


@njit(inline="always")
def _scratch_size(kind, r, d, w):
    D = 1 + r + r * r if kind == BASED else r
    return 2 * r + 3 * d + max(r, d) + 2 + 2 * D + d + w + 1


@njit(cache=True)
def _project(kind, r, d, m, aux, o, u, f):
    """The head's affine maps of stream ``u`` into ``f``'s projection block (:func:`_layout`):
    all that depends on the token alone, so layer 0 computes it once per query token."""
    RQ, RK, V, A, G, FQ, FK, O, P, block = _layout(kind, r, d)
    _affine(aux, o[_WQ], o[_BQ], r, m, u, f, RQ)
    _affine(aux, o[_WK], o[_BK], r, m, u, f, RK)
    _affine(aux, o[_WV], o[_BV], d, m, u, f, V)
    _affine(aux, o[_WA], o[_BA], d, m, u, f, A)
    if kind == GLA:
        _affine(aux, o[_WG], o[_BG], r, m, u, f, G)
    elif kind == DELTA or kind == GATED_DELTA:
        _affine(aux, o[_WBETA], o[_BBETA], 1, m, u, f, G)
        if kind == GATED_DELTA:
            _affine(aux, o[_WG], o[_BG], 1, m, u, f, G + 1)
    elif kind == MAMBA:
        _affine(aux, o[_WG], o[_BG], d, m, u, f, G)


@njit(cache=True)
def _head(kind, act, r, d, m, w, top, eps, count, aux, o, st, cd, s0, u, f, delta, projected,
          residual):  # fmt: skip
    """One head's step on stream ``u``: update its state ``st[s0:]`` (codes ``cd``) and
    return ``<a(u), o>``, adding ``W_u o`` to ``delta`` when ``residual``.  ``o``: the head's
    offsets; ``projected``: ``f``'s projection block already holds :func:`_project`'s.
    """
    D = 1 + r + r * r if kind == BASED else r
    RQ, RK, V, A, G, FQ, FK, O, P, block = _layout(kind, r, d)
    lo0, step0 = o[_LO], o[_STEP]
    if not projected:
        _project(kind, r, d, m, aux, o, u, f)
    if kind == BASED:  # the Taylor features of the projections (docs/theory.md 5.3)
        r4, r2 = math.sqrt(math.sqrt(r)), math.sqrt(2.0) * math.sqrt(r)
        for side in range(2):
            src, dst = RQ + side * r, FQ + side * D
            f[dst] = 1.0
            for i in range(r):
                f[dst + 1 + i] = f[src + i] / r4
            for i in range(r):
                for j in range(r):
                    f[dst + 1 + r + i * r + j] = f[src + i] * f[src + j] / r2
    else:
        for k in range(r):
            f[FQ + k] = f[RQ + k]
            f[FK + k] = f[RK + k]
    if kind == LINEAR or kind == BASED:
        norm = kind == BASED or (act != 2 and act != 4)
        if kind == LINEAR:
            sq, sk = 1e-4, 1e-4
            for k in range(r):
                f[FQ + k] = feature(f[FQ + k], act)
                f[FK + k] = feature(f[FK + k], act)
                sq += f[FQ + k]
                sk += f[FK + k]
            if act == 4:  # elu1sum: each feature over the sum (fla's norm_q, norm_k)
                for k in range(r):
                    f[FQ + k] = f[FQ + k] / sq
                    f[FK + k] = f[FK + k] / sk
        W = d + 1 if norm else d
        den = eps
        for k in range(D):
            for c in range(W):
                e = k * W + c
                x = st[s0 + e] + f[FK + k] * (f[V + c] if c < d else 1.0)
                code, st[s0 + e] = register(x, aux[lo0 + e], aux[step0 + e], top)
                cd[s0 + e] = int(code)
            if norm:
                den += f[FQ + k] * st[s0 + k * W + d]
        for c in range(d):
            num = 0.0
            for k in range(D):
                num += f[FQ + k] * st[s0 + k * W + c]
            f[O + c] = num / den if norm else num
    elif kind == WINDOW:
        S = r + d
        for e in range(S, w * S):  # the slots move one older; the newest is this token's
            st[s0 + e - S] = st[s0 + e]
            cd[s0 + e - S] = cd[s0 + e]
        for j in range(S):
            e = (w - 1) * S + j
            x = f[FK + j] if j < r else f[V + j - r]
            code, st[s0 + e] = register(x, aux[lo0 + e], aux[step0 + e], top)
            cd[s0 + e] = int(code)
        first = w - min(count, w)
        sr = math.sqrt(r)
        best = -math.inf
        for j in range(first, w):
            z = 0.0
            for k in range(r):
                z += f[FQ + k] * st[s0 + j * S + k]
            f[P + j] = z / sr
            best = max(best, f[P + j])
        tot = 0.0
        for j in range(first, w):
            f[P + j] = math.exp(f[P + j] - best)
            tot += f[P + j]
        for c in range(d):
            num = 0.0
            for j in range(first, w):
                num += f[P + j] * st[s0 + j * S + r + c]
            f[O + c] = num / tot
    else:  # gla, deltanet, gated-deltanet, mamba: an r x d state, S[k, c] at k d + c
        sr = math.sqrt(r)
        if kind == GLA or kind == RETENTION:
            for k in range(r):  # exp(logsigmoid(z) / 16); retention: its fixed decay
                if kind == GLA:
                    z = f[G + k]
                    ls = -softplus(-z)
                    f[G + k] = math.exp(ls / 16.0)
                else:
                    f[G + k] = aux[o[_DECAY]]
            for k in range(r):
                for c in range(d):
                    e = k * d + c
                    x = f[G + k] * st[s0 + e] + f[FK + k] * f[V + c]
                    code, st[s0 + e] = register(x, aux[lo0 + e], aux[step0 + e], top)
                    cd[s0 + e] = int(code)
            for k in range(r):
                f[FQ + k] = f[FQ + k] / sr
        elif kind == DELTA or kind == GATED_DELTA:
            nq, nk = 0.0, 0.0
            for k in range(r):
                nq += f[FQ + k] * f[FQ + k]
                nk += f[FK + k] * f[FK + k]
            nq, nk = max(math.sqrt(nq), 1e-12), max(math.sqrt(nk), 1e-12)
            for k in range(r):
                f[FQ + k] = f[FQ + k] / nq / sr
                f[FK + k] = f[FK + k] / nk
            beta = _sigmoid(f[G])
            gamma = 1.0
            if kind == GATED_DELTA:
                gamma = math.exp(-math.exp(aux[o[_ALOG]]) * softplus(f[G + 1]))
            for c in range(d):
                pred = 0.0
                for k in range(r):
                    pred += gamma * st[s0 + k * d + c] * f[FK + k]  # (gamma S) k
                f[G + c] = beta * (f[V + c] - pred)  # the delta rule's new value
            for k in range(r):
                for c in range(d):
                    e = k * d + c
                    x = gamma * st[s0 + e] + f[FK + k] * f[G + c]
                    code, st[s0 + e] = register(x, aux[lo0 + e], aux[step0 + e], top)
                    cd[s0 + e] = int(code)
        else:  # MAMBA: dt = softplus(wg u + bg); S[k, c] = exp(-dt_c exp(alog)) S + B_k dt_c x_c
            for c in range(d):
                f[G + c] = softplus(f[G + c])
            for k in range(r):
                for c in range(d):
                    e = k * d + c
                    decay = math.exp(-f[G + c] * math.exp(aux[o[_ALOG] + e]))
                    x = decay * st[s0 + e] + f[FK + k] * f[G + c] * f[V + c]
                    code, st[s0 + e] = register(x, aux[lo0 + e], aux[step0 + e], top)
                    cd[s0 + e] = int(code)
        for c in range(d):
            num = 0.0
            for k in range(r):
                num += f[FQ + k] * st[s0 + k * d + c]
            if kind == MAMBA:
                num += aux[o[_DSKIP] + c] * f[V + c]
            f[O + c] = num
    y = 0.0
    for c in range(d):
        y += f[A + c] * f[O + c]
    if not residual:
        return y
    wu = o[_WU]
    for i in range(m):
        z = 0.0
        for c in range(d):
            z += aux[wu + i * d + c] * f[O + c]
        delta[i] += z
    return y


@njit(cache=True)
def _unpack(tokens, b, pos, m, u):
    for i in range(m):
        bit = (tokens[b, pos, i >> 6] >> np.uint64(i & 63)) & np.uint64(1)
        u[i] = 2.0 * float(bit) - 1.0


@njit(cache=True, nogil=True)
def _loop(tokens, order, dims, offs, aux, eps, store, fp, ans, tr, shared):
    """Every input of ``tokens``.  ``shared``: the query tokens are the same in every input
    (a family's fixed queries): their output bias and layer 0's projections are computed
    once (the same floats; the queries' later layers read the input's state)."""
    L, H, r, d, m = dims[0], dims[1], dims[2], dims[3], dims[4]
    kind, act, E, w = dims[5], dims[6], dims[7], dims[8]
    top, q, s, n = float(dims[9]), dims[10], dims[11], dims[12]
    cut_only = dims[13] == 1  # round the transcript only (the state is exact elsewhere)
    head_top = -1.0 if cut_only else top
    block = _layout(kind, r, d)[9]
    f = np.zeros(_scratch_size(kind, r, d, w))
    u = np.zeros(m)
    delta = np.zeros(m)
    st = np.zeros(L * H * E)
    cd = np.zeros(L * H * E, dtype=np.int64)
    o = np.zeros(_NB - 1, dtype=np.int64)
    bias = offs[L * H * _NB]
    cut = n - q - 1  # the step after which the state is the transcript
    qcache = np.zeros((q if shared else 0, H, block))
    qbias = np.zeros(q if shared else 0)
    if shared and tokens.shape[0] > 0:
        for p in range(q):
            _unpack(tokens, 0, p, m, u)
            y = aux[bias + m]
            for i in range(m):
                y += aux[bias + i] * u[i]
            qbias[p] = y
            for h in range(H):
                for i in range(_NB - 1):
                    o[i] = offs[h * _NB + i]
                _project(kind, r, d, m, aux, o, u, f)
                for i in range(block):
                    qcache[p, h, i] = f[i]
    for b in range(tokens.shape[0]):
        st[:] = 0.0
        cd[:] = 0
        for t in range(n):
            pos = order[t]
            cached = shared and pos < q
            if not cached or L > 1:  # later layers read the stream
                _unpack(tokens, b, pos, m, u)
            if cached:
                y = qbias[pos]
            else:
                y = aux[bias + m]
                for i in range(m):
                    y += aux[bias + i] * u[i]
            for lay in range(L):
                residual = lay < L - 1  # the last layer's update of the stream is never read
                if residual:
                    delta[:] = 0.0
                for h in range(H):
                    g = (lay * H + h) * _NB
                    for i in range(_NB - 1):
                        o[i] = offs[g + i]
                    s0 = (lay * H + h) * E
                    projected = cached and lay == 0
                    if projected:
                        for i in range(block):
                            f[i] = qcache[pos, h, i]
                    y += _head(kind, act, r, d, m, w, head_top, eps, t + 1, aux, o, st, cd, s0,
                               u, f, delta, projected, residual)  # fmt: skip
                if residual:
                    for i in range(m):
                        u[i] += delta[i]
            if t == cut and cut_only:
                for g in range(L * H):
                    lo0, step0 = offs[g * _NB + _LO], offs[g * _NB + _STEP]
                    for e in range(E):
                        code, st[g * E + e] = register(st[g * E + e], aux[lo0 + e],
                                                        aux[step0 + e], top)  # fmt: skip
                        cd[g * E + e] = int(code)
            if t == cut:
                h1, h2 = np.uint64(SEED1), np.uint64(SEED2)
                for e in range(L * H * E):
                    h1, h2 = fold(h1, h2, e, cd[e])
                    if store:
                        tr[b, e] = cd[e]
                fp[b, 0], fp[b, 1] = h1, h2
            if pos < q:
                ans[b, pos] = answer_of(y, s)
