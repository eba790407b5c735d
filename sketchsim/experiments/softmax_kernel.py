"""The dense softmax head's attention and readout as one jitted CPU kernel.

For short sequences (the suites have N = 3) torch's broadcast products over
``[B, N, N, d]`` cost about a nanosecond per entry on the CPU, and a training
step of the softmax head on 4,000 random triples spent most of its 30 ms there.
This kernel computes, per input ``b`` and query ``i`` (THEORY section 2 with
``phi = exp``, the temperature folded into ``q``)::

    w_ij = softmax_j(<q_i, k_j>),   y_i = sum_j w_ij <a_i, v_j>

and the exact gradients of ``y`` with respect to ``q, k, v, a`` in one pass:
with ``av_ij = <a_i, v_j>`` and upstream ``g_i``,
``d av_ij = g_i w_ij`` and ``d s_ij = g_i w_ij (av_ij - y_i)`` (the softmax
Jacobian applied to ``g_i av_i``).  Sums accumulate in float64.
"""

from __future__ import annotations

import math

import torch
from numba import njit
from torch.autograd.function import once_differentiable

#: numba fast-math flags of the training kernels: float sums may be reassociated
#: and contracted (vectorized), while NaN and infinity keep their IEEE meaning (no
#: ``nnan``/``ninf``); with ``error_model="numpy"`` division by zero gives inf.
FAST_MATH = {"reassoc", "contract"}

__all__ = ["FAST_MATH", "softmax_in_place", "softmax_readout", "softmax_readout_reference"]


@njit(cache=True, fastmath=FAST_MATH, error_model="numpy")
def softmax_in_place(w, b, i, n):  # pragma: no cover - jitted
    """``w[b, i, :n] = softmax(w[b, i, :n])``, shifted by the row's maximum."""
    top = w[b, i, 0]
    for j in range(1, n):
        top = max(top, w[b, i, j])
    total = 0.0
    for j in range(n):
        ex = math.exp(w[b, i, j] - top)
        w[b, i, j] = ex
        total += ex
    for j in range(n):
        w[b, i, j] /= total


@njit(cache=True, fastmath=FAST_MATH, error_model="numpy")
def _forward(q, k, v, a, y, w, av):  # pragma: no cover - jitted
    nb, nq, e = q.shape
    n, d = k.shape[1], v.shape[2]
    for b in range(nb):
        for i in range(nq):
            for j in range(n):
                s = 0.0
                for c in range(e):
                    s += q[b, i, c] * k[b, j, c]
                w[b, i, j] = s
            softmax_in_place(w, b, i, n)
            acc = 0.0
            for j in range(n):
                s = 0.0
                for c in range(d):
                    s += a[b, i, c] * v[b, j, c]
                av[b, i, j] = s
                acc += w[b, i, j] * s
            y[b, i] = acc


@njit(cache=True, fastmath=FAST_MATH, error_model="numpy")
def _backward(q, k, v, a, w, av, y, g, gq, gk, gv, ga):  # pragma: no cover - jitted
    # every output entry is written here (no zeroed buffers: fresh pages are slow)
    nb, nq, e = q.shape
    n, d = k.shape[1], v.shape[2]
    for b in range(nb):
        for j in range(n):
            for c in range(e):
                gk[b, j, c] = 0.0
            for c in range(d):
                gv[b, j, c] = 0.0
        for i in range(nq):
            for c in range(e):
                gq[b, i, c] = 0.0
            for c in range(d):
                ga[b, i, c] = 0.0
            gi = g[b, i]
            for j in range(n):
                wij = w[b, i, j]
                ds = gi * wij * (av[b, i, j] - y[b, i])
                dav = gi * wij
                for c in range(e):
                    gq[b, i, c] += ds * k[b, j, c]
                    gk[b, j, c] += ds * q[b, i, c]
                for c in range(d):
                    ga[b, i, c] += dav * v[b, j, c]
                    gv[b, j, c] += dav * a[b, i, c]


class _SoftmaxReadout(torch.autograd.Function):
    # buffers come from torch's allocator, which reuses its pages; NumPy's
    # fresh allocations of a few MB page-fault on every step
    @staticmethod
    def forward(ctx, q, k, v, a):
        q, k, v, a = (t.detach().contiguous() for t in (q, k, v, a))
        nb, nq, n = q.shape[0], q.shape[1], k.shape[1]
        y = q.new_empty((nb, nq))
        w, av = q.new_empty((nb, nq, n)), q.new_empty((nb, nq, n))
        _forward(q.numpy(), k.numpy(), v.numpy(), a.numpy(), y.numpy(), w.numpy(), av.numpy())
        ctx.tensors = (q, k, v, a, w, av, y)
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        saved = ctx.tensors
        grads = [t.new_empty(t.shape) for t in saved[:4]]
        arrays = [t.numpy() for t in (*saved, g.contiguous(), *grads)]
        _backward(*arrays)
        return tuple(grads)


def softmax_readout_reference(q, k, v, a):
    """The same function in torch operations (any device, any order of derivatives)."""
    w = torch.softmax((q.unsqueeze(2) * k.unsqueeze(1)).sum(-1), -1)
    av = (a.unsqueeze(2) * v.unsqueeze(1)).sum(-1)
    return (w * av).sum(-1)


def softmax_readout(q, k, v, a):
    """``y_bi = sum_j softmax_j(<q_bi, k_bj>) <a_bi, v_bj>``.

    Parameters
    ----------
    q, a : torch.Tensor
        Queries ``[B, Nq, E]`` (the temperature already applied) and readout
        vectors ``[B, Nq, D]``.
    k, v : torch.Tensor
        Keys ``[B, N, E]`` and values ``[B, N, D]``.

    Returns
    -------
    torch.Tensor
        ``[B, Nq]``.  On the CPU in float32 or float64 the jitted kernel (first
        derivatives only); elsewhere :func:`softmax_readout_reference`.
    """
    tensors = (q, k, v, a)
    if all(t.device.type == "cpu" and t.dtype == q.dtype for t in tensors) and q.dtype in (
        torch.float32,
        torch.float64,
    ):
        return _SoftmaxReadout.apply(q, k, v, a)
    return softmax_readout_reference(q, k, v, a)
