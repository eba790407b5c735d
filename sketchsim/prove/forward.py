"""A causal weights file's forward over boxes of answer values, in intervals (theory.md 5.5).

:class:`BoxModel` holds a causal file's arrays for F(q, s) at ``K`` bits and
computes, for a batch of boxes ``t_i in [lo_i, hi_i]``, enclosures of every cut
code (:meth:`BoxModel.cut`) and of the queries' answers
(:meth:`BoxModel.answers`), following docs/theory.md 5.3 token by token.  The
data token's layer-0 pre-activations come from exact per-block tables; the
rest is :mod:`sketchsim.prove.interval` arithmetic.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from sketchsim.prove.interval import REL, TINY, Iv, dot, point, rel_sum, widen
from sketchsim.sketch.causal import causal_entries, taylor_width
from sketchsim.sketch.kinds import retention_decay
from sketchsim.sketch.registers import register_steps

__all__ = ["BoxModel", "Cut", "SLACK", "PROJECTIONS"]

#: The prover's own decisions are moved out by this much more (relative, at least
#: absolute in code or answer units), so any implementation of theory.md 5.5 whose
#: sums differ from these by rounding accepts what the prover accepts.
SLACK = 2.0**-30
#: The layer-0 pre-activation rows a head reads from a token, per kind (in this order).
PROJECTIONS = ("wq", "wk", "wv", "wa", "wg", "wbeta")


@dataclass
class Cut:
    """The cut of a batch of boxes: code ranges ``lo, hi`` (B, L H E) and the states."""

    code_lo: np.ndarray
    code_hi: np.ndarray
    states: dict


def _softplus(z):
    with np.errstate(over="ignore"):
        return np.where(z > 0, z + np.log1p(np.exp(-np.abs(z))), np.log1p(np.exp(np.minimum(z, 0))))


def _sigmoid(z):
    with np.errstate(over="ignore"):
        e = np.exp(-np.abs(z))
        return np.where(z >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def _elu1(z):
    with np.errstate(over="ignore"):
        return np.where(z > 0, z + 1.0, np.exp(np.minimum(z, 0.0)))


def _relu(z):
    return np.maximum(z, 0.0) + 1e-3


def _logsigmoid(z):
    return -_softplus(-z)


class BoxModel:
    """A causal weights file on F(q, s) at ``bits`` bits, evaluated over boxes.

    Parameters
    ----------
    weights : Weights
        A causal weights file (:func:`sketchsim.sketch.weights_file.load_weights`).
    perm : ndarray
        The family's layout, ``(q, s)``: bit ``perm[i, k]`` is one iff ``k < t_i``.
    bits : int
        Register bits ``K``.
    rounding : str
        ``every`` or ``cut`` (theory.md 5.3).
    """

    def __init__(self, weights, perm: np.ndarray, bits: int, rounding: str = "every",
                 queries: np.ndarray | None = None, s: int | None = None):  # fmt: skip
        a = weights.arch
        self.arch = a
        self.kind = a["kind"]
        self.L, self.H, self.r, self.d = a["layers"], a["heads"], a["rank"], a["value_width"]
        self.m = a["m"]
        # F(q, s): its layout ``perm``; another family: its query tokens' streams and ``s``
        self.q, self.s = perm.shape if perm is not None else (queries.shape[0], s)
        self.E = causal_entries(a)
        self.fmap = a.get("feature_map", "")
        self.eps = float(a["eps"])
        self.w = int(a.get("window", 0) or 0)
        self.top = 2**bits - 1
        self.every = rounding == "every"
        self.perm = None if perm is None else np.asarray(perm, dtype=np.int64)
        g = weights.arrays
        self.wb, self.bb = np.asarray(g["wb"], float), float(g["bb"][0])
        self.heads = {}
        for l in range(self.L):
            for h in range(self.H):
                pre = f"L{l}.H{h}."
                p = {k[len(pre) :]: np.asarray(v, float) for k, v in g.items() if k.startswith(pre)}
                p["step"] = register_steps(p["span"], bits)
                self.heads[(l, h)] = p
        if perm is not None:
            self._tables()
        else:
            self.blocks = self._rows()[0]
        self._queries(queries)

    # ------------------------------------------------------------------ layer 0
    def _rows(self):
        """Every layer-0 weight row of the data token, stacked: (name, head, W, b) blocks."""
        blocks, at = [], 0
        for h in range(self.H):
            p = self.heads[(0, h)]
            for name in PROJECTIONS:
                if name in p:
                    W = p[name].reshape(-1, self.m)
                    blocks.append((name, h, at, at + W.shape[0], W, p["b" + name[1:]]))
                    at += W.shape[0]
        blocks.append(("wb", -1, at, at + 1, self.wb[None, :], np.array([self.bb])))
        return blocks, at + 1

    def _tables(self):
        """``rng[i, a, b, P]``: min and max over ``t in [a, b]`` of block ``i``'s part."""
        q, s = self.q, self.s
        self.blocks, P = self._rows()
        W = np.concatenate([blk[4] for blk in self.blocks])
        b = np.concatenate([np.asarray(blk[5], float).ravel() for blk in self.blocks])
        C = np.zeros((q, s + 1, P))
        for i in range(q):
            C[i, 0] = -W[:, i * s : (i + 1) * s].sum(axis=1)
            for t in range(1, s + 1):
                C[i, t] = C[i, t - 1] + 2.0 * W[:, self.perm[i, t - 1]]
        self.base = b - W[:, q * s :].sum(axis=1)
        # the engine's dot of m + 1 terms, and these tables' own sums (theory.md 5.5)
        self.margin = rel_sum(self.m + 1) * (np.abs(b) + np.abs(W).sum(axis=1))
        lo = np.full((q, s + 1, s + 1, P), np.inf)
        hi = np.full((q, s + 1, s + 1, P), -np.inf)
        for a_ in range(s + 1):
            run_lo, run_hi = C[:, a_], C[:, a_]
            for b_ in range(a_, s + 1):
                run_lo, run_hi = np.minimum(run_lo, C[:, b_]), np.maximum(run_hi, C[:, b_])
                lo[:, a_, b_], hi[:, a_, b_] = run_lo, run_hi
        self.tab_lo, self.tab_hi, self.C = lo, hi, C

    def data_pre(self, box_lo: np.ndarray, box_hi: np.ndarray) -> Iv:
        """The data token's layer-0 pre-activations over boxes: (B, P), exact ranges moved out."""
        idx = np.arange(self.q)
        lo = self.base + self.tab_lo[idx, box_lo, box_hi].sum(axis=1)
        hi = self.base + self.tab_hi[idx, box_lo, box_hi].sum(axis=1)
        return Iv(lo - self.margin, hi + self.margin)

    def data_stream(self, box_lo, box_hi) -> Iv:
        """The data token's ``u^0`` over boxes: each bit -1, +1 or [-1, 1]."""
        B = box_lo.shape[0]
        lo, hi = -np.ones((B, self.m)), -np.ones((B, self.m))
        k = np.arange(self.s)
        for i in range(self.q):
            bits = self.perm[i]
            lo[:, bits] = np.where(k[None, :] < box_lo[:, i : i + 1], 1.0, -1.0)
            hi[:, bits] = np.where(k[None, :] < box_hi[:, i : i + 1], 1.0, -1.0)
        return Iv(lo, hi)

    def _queries(self, U=None):
        q, s, m = self.q, self.s, self.m
        if U is None:  # F(q, s): query i has ones in block i and the pad
            U = -np.ones((q, m))
            for i in range(q):
                U[i, i * s : (i + 1) * s] = 1.0
            U[:, q * s :] = 1.0
        self.query_u = np.asarray(U, dtype=np.float64)
        # layer-0 pre-activations of the query tokens: points, by the dot rule
        W = np.concatenate([blk[4] for blk in self.blocks])
        b = np.concatenate([np.asarray(blk[5], float).ravel() for blk in self.blocks])
        self.query_pre = dot(W, point(self.query_u), b)  # (q, P)

    def _split(self, pre: Iv) -> tuple[dict, Iv]:
        """Per head (layer 0) its projections, and the base output row."""
        out = {}
        for name, h, a_, b_, _, _ in self.blocks:
            if name == "wb":
                base = pre[:, a_]
            else:
                out.setdefault(h, {})[name] = pre[:, a_:b_]
        return out, base

    # ------------------------------------------------------------------ the forward
    def _project(self, l, h, u: Iv, B: int) -> dict:
        p = self.heads[(l, h)]
        return {n: dot(p[n].reshape(-1, self.m), u, p["b" + n[1:]]) for n in PROJECTIONS if n in p}

    def _token(self, states: dict, pre0: dict, base: Iv, u: Iv, pos: int, quant: bool):
        """One token through every layer: returns ``y`` (B,) and updates ``states``."""
        y = base
        for l in range(self.L):
            delta = None
            for h in range(self.H):
                proj = pre0[h] if l == 0 else self._project(l, h, u, u.shape[0])
                o, states[(l, h)] = self._head(l, h, proj, states.get((l, h)), pos, quant)
                y = y + (proj["wa"] * o).sum(axis=1)
                part = dot(self.heads[(l, h)]["wu"], o)
                delta = part if delta is None else delta + part
            if l + 1 < self.L:
                u = u + delta
        return y

    def _quant(self, l, h, x: Iv, sl=slice(None)):
        """Code ranges and the register's state for ``x`` (B, n) against entries ``sl``."""
        p = self.heads[(l, h)]
        lo_e, step = p["lo"][sl], p["step"][sl]
        z = (x - lo_e) / step + 0.5
        zl, zh = z.lo, z.hi
        slack_l = SLACK * np.maximum(1.0, np.abs(zl))
        slack_h = SLACK * np.maximum(1.0, np.abs(zh))
        with np.errstate(invalid="ignore"):
            cl = np.floor(np.clip(zl - slack_l, -1.0, self.top + 1.0))
            ch = np.floor(np.clip(zh + slack_h, -1.0, self.top + 1.0))
        bad = np.isnan(cl) | np.isnan(ch) | z.unbounded()
        cl = np.where(bad, 0.0, np.clip(cl, 0, self.top))
        ch = np.where(bad, float(self.top), np.clip(ch, 0, self.top))
        state = widen(lo_e + step * cl, lo_e + step * ch)
        return cl.astype(np.int64), ch.astype(np.int64), state

    def _head(self, l, h, proj, st, pos, quant):
        kind = self.kind
        p = self.heads[(l, h)]
        r, d = self.r, self.d
        qv, kv, v = proj["wq"], proj["wk"], proj["wv"]
        B = qv.shape[0]
        if kind in ("linear", "based"):
            fq, fk = self._features(qv), self._features(kv)
            norm = kind == "based" or self.fmap not in ("signed", "elu1sum")
            D = fq.shape[1]
            w = d + 1 if norm else d
            if st is None:
                st = point(np.zeros((B, D, w)))
            add = fk[:, :, None] * v[:, None, :]
            if norm:
                add = _cat(add, fk[:, :, None])
            S = st + add
            S = self._round(l, h, S, quant)
            o = (fq[:, :, None] * S[:, :, :d]).sum(axis=1)
            if norm:
                o = o / ((fq * S[:, :, d]).sum(axis=1) + self.eps)[:, None]
            return o, S
        if kind == "window":
            return self._window(l, h, proj, st, pos, quant)
        if st is None:
            st = point(np.zeros((B, r, d)))
        if kind in ("gla", "retention"):
            if kind == "gla":
                gate = (proj["wg"].monotone(_logsigmoid) * (1.0 / 16.0)).monotone(np.exp)
            else:  # the fixed decay, exact in floating point
                gate = point(np.full((B, r), retention_decay(h)))
            S = gate[:, :, None] * st + kv[:, :, None] * v[:, None, :]
            qs = qv * (1.0 / math.sqrt(r))
        elif kind in ("deltanet", "gated-deltanet"):
            nq = qv.square().sum(axis=1).monotone(np.sqrt).maximum(1e-12)
            qs = qv / nq[:, None] * (1.0 / math.sqrt(r))
            nk = kv.square().sum(axis=1).monotone(np.sqrt).maximum(1e-12)
            kn = kv / nk[:, None]
            beta = proj["wbeta"][:, 0].monotone(_sigmoid)
            S = st
            if kind == "gated-deltanet":
                sp = proj["wg"][:, 0].monotone(_softplus)
                decay = (sp * (-math.exp(float(p["alog"][0])))).monotone(np.exp)
                S = decay[:, None, None] * S
            new = beta[:, None] * (v - (S * kn[:, :, None]).sum(axis=1))
            S = S + kn[:, :, None] * new[:, None, :]
        else:  # mamba
            dt = proj["wg"].monotone(_softplus)
            A = np.exp(p["alog"])  # (r, d), constants as the engine computes them
            decay = (dt[:, None, :] * (-A)).monotone(np.exp)
            S = decay * st + kv[:, :, None] * (dt * v)[:, None, :]
            qs = qv
        S = self._round(l, h, S, quant)
        o = (qs[:, :, None] * S).sum(axis=1)
        if kind == "mamba":
            o = o + v * p["dskip"]
        return o, S

    def _features(self, x: Iv) -> Iv:
        if self.kind == "based":
            r = self.r
            r4, r2 = math.sqrt(math.sqrt(r)), math.sqrt(2.0) * math.sqrt(r)
            B = x.shape[0]
            outer = x[:, :, None] * x[:, None, :]
            sq = x.square()
            ii = np.arange(r)
            lo, hi = outer.lo.copy(), outer.hi.copy()
            lo[:, ii, ii], hi[:, ii, ii] = sq.lo, sq.hi
            one = point(np.ones((B, 1)))
            return _cat(one, x * (1.0 / r4), Iv(lo, hi).reshape(B, r * r) * (1.0 / r2))
        fm = self.fmap
        if fm in ("elu1", "elu1sum"):
            f = x.monotone(_elu1)
            if fm == "elu1":
                return f
            # sum_{k != j} f_k, end by end (each end's sum over the others is exact in reals)
            n = f.shape[1]
            mag = np.abs(f.hi).sum(axis=1, keepdims=True)
            rest = _moved_iv(
                f.lo.sum(axis=1, keepdims=True) - f.lo,
                f.hi.sum(axis=1, keepdims=True) - f.hi,
                n * (mag * REL + TINY),
            )
            rest = Iv(np.maximum(rest.lo, 0.0), rest.hi)
            lo = f.lo / (1e-4 + f.lo + rest.hi)
            hi = f.hi / (1e-4 + f.hi + rest.lo)
            return widen(lo, hi)
        if fm == "relu":
            return x.monotone(_relu)
        if fm == "softplus":
            return x.monotone(_softplus)
        return x

    def _round(self, l, h, S: Iv, quant: bool) -> Iv:
        if not quant:
            return S
        shape = S.shape
        B = shape[0]
        flat = Iv(S.lo.reshape(B, -1), S.hi.reshape(B, -1))
        _, _, st = self._quant(l, h, flat)
        return Iv(st.lo.reshape(shape), st.hi.reshape(shape))

    def _window(self, l, h, proj, st, pos, quant):
        r, d, w = self.r, self.d, self.w
        qv, kv, v = proj["wq"], proj["wk"], proj["wv"]
        B = qv.shape[0]
        if st is None:
            st = point(np.zeros((B, w, r + d)))
        new = _cat(kv, v)
        if quant:
            _, _, new = self._quant(l, h, new, slice(self.E - (r + d), self.E))
        S = _cat(st[:, 1:], new[:, None, :], axis=1)
        n = min(pos + 1, w)
        keys, vals = S[:, w - n :, :r], S[:, w - n :, r:]
        logits = (keys * qv[:, None, :]).sum(axis=2) * (1.0 / math.sqrt(r))  # (B, n)
        ps = []
        for j in range(n):
            others = [k for k in range(n) if k != j]
            if others:
                diff = logits[:, others] - logits[:, j : j + 1]
                den = diff.monotone(np.exp).sum(axis=1) + 1.0
                ps.append(1.0 / den)
            else:
                ps.append(point(np.ones(B)))
        pw = Iv(np.stack([x.lo for x in ps], 1), np.stack([x.hi for x in ps], 1))
        o = (pw[:, :, None] * vals).sum(axis=1)
        return o, S

    # ------------------------------------------------------------------ public
    def token_terms(self, U: np.ndarray) -> dict:
        """Per head, each token's state from zero, unrounded: ``(B, *state)`` intervals for
        the streams ``U`` (B, m) (one layer; a sum-state kind's term of the cut state)."""
        W = np.concatenate([blk[4] for blk in self.blocks])
        b = np.concatenate([np.asarray(blk[5], float).ravel() for blk in self.blocks])
        heads0, _ = self._split(dot(W, point(U), b))
        return {h: self._head(0, h, heads0[h], None, 0, False)[1] for h in range(self.H)}

    def corner_points(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Counterexample candidates in boxes: the corners that minimize or maximize each
        layer-0 pre-activation (exact: it is a sum over blocks)."""
        C = self.C  # (q, s + 1, P)
        t = np.arange(C.shape[1])
        out = []
        for b in range(lo.shape[0]):
            inside = (t[None, :] >= lo[b][:, None]) & (t[None, :] <= hi[b][:, None])
            out.append(np.where(inside[:, :, None], C, np.inf).argmin(axis=1).T)  # (P, q)
            out.append(np.where(inside[:, :, None], C, -np.inf).argmax(axis=1).T)
        return np.unique(np.concatenate(out), axis=0)

    def cut(self, box_lo: np.ndarray, box_hi: np.ndarray) -> Cut:
        """The cut codes' ranges and the states after the data token, over boxes."""
        pre = self.data_pre(box_lo, box_hi)
        heads0, base = self._split(pre)
        u = self.data_stream(box_lo, box_hi) if self.L > 1 else None
        states: dict = {}
        self._token(states, heads0, base, u, 0, self.every)
        lo, hi, out = [], [], {}
        for l in range(self.L):
            for h in range(self.H):
                S = states[(l, h)]
                B = S.shape[0]
                flat = Iv(S.lo.reshape(B, -1), S.hi.reshape(B, -1))
                cl, ch, st = self._quant(l, h, flat)
                if self.every:  # already in its registers; a window's empty slots hold code 0
                    st = flat
                    if self.kind == "window":
                        empty = (self.w - 1) * (self.r + self.d)
                        cl[:, :empty], ch[:, :empty] = 0, 0
                lo.append(cl)
                hi.append(ch)
                out[(l, h)] = Iv(st.lo.reshape(S.shape), st.hi.reshape(S.shape))
        return Cut(np.concatenate(lo, axis=1), np.concatenate(hi, axis=1), out)

    def states_of_codes(self, code_lo: np.ndarray, code_hi: np.ndarray) -> dict:
        """The registers' states for code ranges (B, L H E)."""
        out, at = {}, 0
        for l in range(self.L):
            for h in range(self.H):
                p = self.heads[(l, h)]
                cl, ch = code_lo[:, at : at + self.E], code_hi[:, at : at + self.E]
                at += self.E
                st = widen(p["lo"] + p["step"] * cl, p["lo"] + p["step"] * ch)
                out[(l, h)] = st.reshape(cl.shape[0], *self._state_shape())
        return out

    def _state_shape(self):
        r, d = self.r, self.d
        if self.kind in ("linear", "based"):
            D = taylor_width(r) if self.kind == "based" else r
            norm = self.kind == "based" or self.fmap not in ("signed", "elu1sum")
            return (D, d + 1 if norm else d)
        if self.kind == "window":
            return (self.w, r + d)
        return (r, d)

    def answers(self, states: dict, upto: int) -> tuple[np.ndarray, np.ndarray]:
        """Answer ranges (B, upto + 1) of queries ``0..upto`` from the cut ``states``."""
        states = dict(states)
        B = next(iter(states.values())).shape[0]
        lo, hi = [], []
        for i in range(upto + 1):
            pre = self.query_pre[i]
            pre = Iv(
                np.broadcast_to(pre.lo, (B, pre.lo.size)), np.broadcast_to(pre.hi, (B, pre.hi.size))
            )
            heads0, base = self._split(pre)
            u = None
            if self.L > 1:
                U = np.broadcast_to(self.query_u[i], (B, self.m))
                u = Iv(U, U)
            y = self._token(states, heads0, base, u, i + 1, self.every)
            a, b = _answer(y, self.s)
            lo.append(a)
            hi.append(b)
        return np.stack(lo, 1), np.stack(hi, 1)


def _answer(y: Iv, s: int):
    z = y + 0.5
    zl = z.lo - SLACK * np.maximum(1.0, np.abs(z.lo))
    zh = z.hi + SLACK * np.maximum(1.0, np.abs(z.hi))
    bad = z.unbounded()
    with np.errstate(invalid="ignore"):
        a = np.clip(np.floor(np.nan_to_num(zl, nan=-2.0, neginf=-2.0, posinf=s + 2.0)), -1, s + 1)
        b = np.clip(
            np.floor(np.nan_to_num(zh, nan=s + 2.0, neginf=-2.0, posinf=s + 2.0)), -1, s + 1
        )
    a = np.where(bad, -1, a).astype(np.int64)
    b = np.where(bad, s + 1, b).astype(np.int64)
    return a, b


def _moved_iv(lo, hi, margin) -> Iv:
    return Iv(lo - margin, hi + margin)


def _cat(*parts: Iv, axis: int = -1) -> Iv:
    lo = np.concatenate([p.lo for p in parts], axis=axis)
    hi = np.concatenate([p.hi for p in parts], axis=axis)
    return Iv(lo, hi)
