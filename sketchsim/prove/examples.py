"""Models built to be right on every input of F(q, s), and ones crafted to be wrong on one.

They are the fixtures of the prover's tests, its benchmark and docs/capacity.md: the
proof of a built-right model must succeed at q = 64, and a crafted model wrong on one
input in ``(s+1)^q`` must never be proved.
"""

from __future__ import annotations

import numpy as np

__all__ = ["counting_model"]


def counting_model(family, bits: int = 4, drop: float = 0.0, bias: float = 20.0):
    """``(header, arrays)`` of a causal ``linear-elu1sum`` model right on every input of
    F(q, s) by construction (``bits >= log2(s + 1)``; :func:`save_weights_file` writes it):
    a constant key feature (``wk = 0``, ``bk = bias``: ``phi`` within 10^-5 of 1), value
    entry ``c`` counting block ``c``'s ones (``t_c``), registers of step 1 from 0, and a
    diagonal readout (query ``i`` reads entry ``i``), minus its own ``phi s``.

    ``drop > 0`` makes the key fall by ``drop`` per one the data token holds beyond
    ``q s - 1``: ``k = bias - drop (sum t - q s + 1)``, at least ``bias`` on every input but
    ``t = (s, ..., s)``, where it is ``bias - drop``; with ``drop = 2 bias`` the model is
    wrong there and right on every other input.
    """
    q, s, m = family.q, family.s, family.m
    d = q
    arch = dict(kind="linear", layers=1, heads=1, rank=1, value_width=d, feature_map="elu1sum",
                m=m, eps=1e-6, window=0)  # fmt: skip
    blocks = np.zeros((d, m))
    for c in range(d):
        blocks[c, c * s : (c + 1) * s] = 0.5
    arrays = {
        "L0.H0.wq": np.zeros((1, m)), "L0.H0.bq": np.array([bias]),
        "L0.H0.wk": np.zeros((1, m)), "L0.H0.bk": np.array([bias]),
        "L0.H0.wv": blocks, "L0.H0.bv": np.full(d, s / 2),
        "L0.H0.wa": blocks / s, "L0.H0.ba": np.full(d, 0.5),
        "L0.H0.wu": np.zeros((m, d)),
        "L0.H0.lo": np.zeros(d), "L0.H0.span": np.full(d, float(2**bits - 1)),
        "wb": np.zeros(m), "bb": np.array([-float(s)]),
    }  # fmt: skip
    if drop:
        # block bits are u = +-1, so sum_i t_i = (sum u + q s) / 2
        wk = np.zeros(m)
        wk[: q * s] = -drop / 2.0
        arrays["L0.H0.wk"] = wk[None, :]
        arrays["L0.H0.bk"] = np.array([bias + drop * (q * s - 1) - drop * q * s / 2.0])
    header = {
        "architecture": arch,
        "family": {"name": family.name, "q": q, "s": s, "seed": family.seed,
                   "options": family.options()},
    }  # fmt: skip
    return header, arrays


def lookup_model(family, bits: int = 12, alpha: float = 1000.0):
    """``(header, arrays)`` of a causal ``linear-relu`` model right on every input of MQAR
    by construction (one layer, one head, rank = keys, d = 1; rounding ``cut``).

    Feature ``j`` of a token fires (``alpha``) only when its key is ``j``: ``k_j =
    alpha (<u_key, 2 p_j - 1> - key_bits + 1)`` with ``p_j`` key ``j``'s bits, and
    ``relu + 10^-3`` keeps the others at ``10^-3``; the value is the token's value bits
    read as a number; a query reads its own key's row, where the state holds ``alpha
    t_i`` over ``2 alpha`` (the data pair and the query itself), so the readout is 2.
    Registers: ``K = bits`` from ``-1`` over ``alpha (s + 1) (pairs + 1)``.
    """
    keys, kb, vb, m = family.keys, family.key_bits, family.value_bits, family.m
    r = keys
    pattern = (np.arange(keys)[:, None] >> np.arange(kb)[None, :]) & 1  # (keys, kb)
    wk = np.zeros((r, m))
    wk[:, :kb] = alpha * (2.0 * pattern - 1.0)
    bk = np.full(r, -alpha * (kb - 1))
    wv = np.zeros((1, m))
    wv[0, kb : kb + vb] = 2.0 ** (np.arange(vb) - 1)
    E = r * 2
    arch = dict(kind="linear", layers=1, heads=1, rank=r, value_width=1, feature_map="relu",
                m=m, eps=1e-6, window=0)  # fmt: skip
    arrays = {
        "L0.H0.wq": wk.copy(), "L0.H0.bq": bk.copy(), "L0.H0.wk": wk, "L0.H0.bk": bk,
        "L0.H0.wv": wv, "L0.H0.bv": np.array([wv.sum()]),
        "L0.H0.wa": np.zeros((1, m)), "L0.H0.ba": np.array([2.0]),
        "L0.H0.wu": np.zeros((m, 1)),
        "L0.H0.lo": np.full(E, -1.0),
        "L0.H0.span": np.full(E, alpha * (family.s + 1) * (family.pairs + 1)),
        "wb": np.zeros(m), "bb": np.array([0.0]),
    }  # fmt: skip
    header = {
        "architecture": arch,
        "family": {"name": family.name, "q": family.q, "s": family.s, "seed": family.seed,
                   "options": family.options()},
    }  # fmt: skip
    return header, arrays


def retention_counting_model(family, bits: int = 4):
    """``(header, arrays)`` of a causal ``retention`` model right on every input of F(q, s)
    by construction: :func:`counting_model`'s counts (key and query 1), read through
    RetNet's decay. After query ``i`` entry ``i`` holds ``gamma^(i+1) t_i + s`` (the decay
    ``gamma = 1 - 2^-5`` of head 0 at each query, plus query ``i``'s own count), so query
    ``i`` reads it with ``A_i = gamma^-(i+1)`` (``a_c`` is ``A_c`` at query ``c`` and 0 at
    the others) and the base output takes ``s A_i`` away."""
    from sketchsim.sketch.kinds import retention_decay

    header, arrays = counting_model(family, bits)
    q, s, m = family.q, family.s, family.m
    A = np.array([retention_decay(0) ** -(c + 1) for c in range(q)])
    header["architecture"] = {**header["architecture"], "kind": "retention",
                              "feature_map": "identity"}  # fmt: skip
    wa, ba, wb = np.zeros((q, m)), A / 2, np.zeros(m)
    for c in range(q):
        wa[c, c * s : (c + 1) * s] = A[c] / (2 * s)
        wb[c * s : (c + 1) * s] = -A[c] / 2
    arrays.update({
        "L0.H0.wq": np.zeros((1, m)), "L0.H0.bq": np.array([1.0]),
        "L0.H0.wk": np.zeros((1, m)), "L0.H0.bk": np.array([1.0]),
        "L0.H0.wa": wa, "L0.H0.ba": ba, "wb": wb, "bb": np.array([-s * A.sum() / 2]),
    })  # fmt: skip
    return header, arrays
