"""The jitted exhaustive enumeration behind :func:`sketchsim.heads.exhaustive.verify`.

Input number ``idx`` in ``[0, 2^(m N))`` has token ``j`` equal to bits
``j*m .. j*m + m - 1`` of ``idx``.  The kernel visits the inputs in *enumeration
order*: ``k = prefix * 2^m + z`` where ``z`` is the last token and ``prefix`` the
first ``N - 1`` tokens (so ``idx = prefix + z * 2^((N-1) m)``); the last token
varies fastest.  Everything that depends only on the prefix (its inner products
and the partial sums of each head) is computed once per prefix, and the
innermost loop over ``z`` adds the last token's terms in the same order as a
plain evaluation, so results are bit-identical to it (``tests/naive.py``).
Imported on first use: it is the only part of ``verify`` that needs numba.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from sketchsim import config
from sketchsim.minip.bits import popcount64
from sketchsim.minip.kernel import dynamic_schedule

__all__ = ["check_range", "tables", "KIND"]

KIND = {"rank1": 0, "softmax": 1, "onehot": 1}
#: Parallel tasks per chunk (handed out one at a time, see ``dynamic_schedule``).
_BLOCKS = 64
_TOL = config.EXACT_TOLERANCE


@njit(inline="always")
def _last_token_n3(kind, etab, egtab, a, b, sa, sb, pan, pad, pam, pbn, pbd, pbm, z_lo, z_hi):
    """N = 3, every position scored: the last token ``z`` over ``z_lo .. z_hi - 1``.

    Same sums in the same key order as the general loop (``p*n``, ``p*d``, ``p*m``
    are the prefix positions' partial numerators, denominators and minima).
    Returns (max error, exact inputs, smallest wrong z or -1).
    """
    max_err = 0.0
    n_exact = 0
    first_bad = np.int64(-1)
    for z in range(z_lo, z_hi):
        gs = popcount64(np.uint64(z))
        ga = popcount64(np.uint64(a & z))
        gb = popcount64(np.uint64(b & z))
        t = min(min(ga, gb), gs)
        if kind == 0:
            e0 = abs((pan + (2.0 * ga - sa)) / 3 - min(pam, ga))
            e1 = abs((pbn + (2.0 * gb - sb)) / 3 - min(pbm, gb))
            num = ((2.0 * ga - gs) + (2.0 * gb - gs)) + (2.0 * gs - gs)
            e2 = abs(num / 3 - t)
        else:
            e0 = abs((pan + egtab[ga]) / (pad + etab[ga]) - min(pam, ga))
            e1 = abs((pbn + egtab[gb]) / (pbd + etab[gb]) - min(pbm, gb))
            num = (egtab[ga] + egtab[gb]) + egtab[gs]
            den = (etab[ga] + etab[gb]) + etab[gs]
            e2 = abs(num / den - t)
        max_err = max(max_err, max(max(e0, e1), e2))
        if e0 < _TOL and e1 < _TOL and e2 < _TOL:
            n_exact += 1
        elif first_bad < 0:
            first_bad = z
    return max_err, n_exact, first_bad


@njit(cache=True)
def _check_block(kind, m, n, etab, egtab, causal, lo, hi, tok, self_ip, part, part_min):
    """Check enumeration positions ``lo .. hi - 1``: (max |y - t|, exact inputs, smallest bad idx).

    ``etab[g] = exp(-beta g)``, ``egtab[g] = etab[g] * g`` (the softmax weight and
    weighted vote of overlap ``g``).  ``tok``, ``self_ip``, ``part`` (2, n) and
    ``part_min`` are scratch for the prefix: its tokens, their weights, the
    partial numerator / denominator (softmax) or vote sum (rank1) of each
    prefix position over the prefix keys, and the partial minimum.
    """
    mask = (np.int64(1) << m) - 1
    last_shift = (n - 1) * m
    first_scored = n - 1 if causal else 0
    max_err = 0.0
    n_exact = 0
    first_bad = np.int64(-1)
    k = lo
    while k < hi:
        prefix = k >> m
        z_lo = k & mask
        z_hi = min(mask + 1, z_lo + (hi - k))
        for j in range(n - 1):
            tok[j] = (prefix >> (j * m)) & mask
            self_ip[j] = popcount64(np.uint64(tok[j]))
        for i in range(first_scored, n - 1):
            num = 0.0
            den = 0.0
            t = self_ip[i]
            for j in range(n - 1):
                g = popcount64(np.uint64(tok[i] & tok[j]))
                t = min(t, g)
                if kind == 0:
                    num += 2.0 * g - self_ip[i]
                else:
                    num += egtab[g]
                    den += etab[g]
            part[0, i] = num
            part[1, i] = den
            part_min[i] = t
        if n == 3 and not causal:  # the paper's length, unrolled with the prefix in registers
            me, ne, fb = _last_token_n3(
                kind,
                etab,
                egtab,
                tok[0],
                tok[1],
                self_ip[0],
                self_ip[1],
                part[0, 0],
                part[1, 0],
                part_min[0],
                part[0, 1],
                part[1, 1],
                part_min[1],
                z_lo,
                z_hi,
            )
            max_err = max(max_err, me)
            n_exact += ne
            if fb >= 0:
                idx = prefix | (fb << last_shift)
                if first_bad < 0 or idx < first_bad:
                    first_bad = idx
            k += z_hi - z_lo
            continue
        for z in range(z_lo, z_hi):
            ok = True
            g_self = popcount64(np.uint64(z))
            # the last position, with keys in order 0 .. n-1
            num_last = 0.0
            den_last = 0.0
            t_last = g_self
            for j in range(n - 1):
                g = popcount64(np.uint64(tok[j] & z))
                t_last = min(t_last, g)
                if kind == 0:
                    num_last += 2.0 * g - g_self
                else:
                    num_last += egtab[g]
                    den_last += etab[g]
                if j >= first_scored:  # finish prefix position j with its last key
                    t = min(part_min[j], g)
                    if kind == 0:
                        y = (part[0, j] + (2.0 * g - self_ip[j])) / n
                    else:
                        y = (part[0, j] + egtab[g]) / (part[1, j] + etab[g])
                    err = abs(y - t)
                    max_err = max(max_err, err)
                    if not err < _TOL:
                        ok = False
            if kind == 0:
                y = (num_last + (2.0 * g_self - g_self)) / n
            else:
                y = (num_last + egtab[g_self]) / (den_last + etab[g_self])
            err = abs(y - t_last)
            max_err = max(max_err, err)
            if not err < _TOL:
                ok = False
            if ok:
                n_exact += 1
            else:
                idx = prefix | (np.int64(z) << last_shift)
                if first_bad < 0 or idx < first_bad:
                    first_bad = idx
        k += z_hi - z_lo
    return max_err, n_exact, first_bad


@njit(parallel=True, cache=True)
def _check_blocks(kind, m, n, etab, egtab, causal, start, count):
    per = (count + _BLOCKS - 1) // _BLOCKS
    max_err = np.zeros(_BLOCKS)
    n_exact = np.zeros(_BLOCKS, dtype=np.int64)
    first_bad = np.full(_BLOCKS, -1, dtype=np.int64)
    for blk in prange(_BLOCKS):
        lo = start + blk * per
        hi = min(start + count, lo + per)
        if lo < hi:
            tok = np.empty(max(n - 1, 1), dtype=np.int64)
            self_ip = np.empty(max(n - 1, 1), dtype=np.int64)
            part = np.empty((2, max(n - 1, 1)))
            part_min = np.empty(max(n - 1, 1), dtype=np.int64)
            max_err[blk], n_exact[blk], first_bad[blk] = _check_block(
                kind, m, n, etab, egtab, causal, lo, hi, tok, self_ip, part, part_min
            )
    return max_err, n_exact, first_bad


def tables(m: int, beta: float) -> tuple[np.ndarray, np.ndarray]:
    """Softmax weight ``exp(-beta g)`` and weighted vote ``g exp(-beta g)`` for g = 0..m."""
    g = np.arange(m + 1, dtype=np.float64)
    etab = np.exp(-beta * g)
    return etab, etab * g


def _verify_range(kind, m, n, beta, causal, start, count):
    """Per parallel block: (max |y - t|, exact inputs, smallest wrong idx or -1).

    Covers enumeration positions ``start .. start + count - 1`` (see the module
    docstring for the order); any split of ``[0, 2^(m n))`` merges to the same
    totals by max, sum and smallest non-negative index.
    """
    etab, egtab = tables(m, float(beta))
    with dynamic_schedule():
        return _check_blocks(kind, m, n, etab, egtab, bool(causal), int(start), int(count))


def check_range(
    construction: str, m: int, n: int, beta: float, causal: bool, start: int, count: int
):
    """Check enumeration positions ``start .. start + count - 1`` of one construction.

    Returns
    -------
    tuple (max_abs_error, exact_inputs, first_bad)
        ``first_bad`` is the smallest wrong input index ``idx`` in the range, or -1.
    """
    errs, n_exact, bad = _verify_range(KIND[construction], m, n, beta, causal, start, count)
    first_bad = int(bad[bad >= 0].min()) if (bad >= 0).any() else -1
    return float(errs.max()), int(n_exact.sum()), first_bad
