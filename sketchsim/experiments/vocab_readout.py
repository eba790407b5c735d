"""The heads' readout on a vocabulary as jitted CPU kernels (gather, normalize, add).

On the vocabulary path (:mod:`sketchsim.experiments.vocabulary`) a head has its
pair matrices on the distinct tokens, ``[V, V]``; what is left per input ``b``
and query ``i`` (token ``u = iq_bi``, keys ``w_j = ids_bj``) is::

    kernel head:   y_bi = sum_j K[u, w_j] AV[u, w_j] / (sum_j K[u, w_j] + eps) + bias[u]
    softmax head:  y_bi = sum_j softmax_j(S[u, w_j]) AV[u, w_j] + bias[u]

(``AV[u, w] = <a(token_u), v(token_w)>``, THEORY section 2).  In torch these
are a dozen small operations and their backward passes per training step; here
one pass each way, the gradients scattered into ``[V, V]`` and ``[V]``.
Sums accumulate in float64.
"""

from __future__ import annotations

import torch
from numba import njit
from torch.autograd.function import once_differentiable

from sketchsim.experiments.softmax_kernel import FAST_MATH as _FAST
from sketchsim.experiments.softmax_kernel import softmax_in_place

__all__ = ["kernel_readout", "softmax_readout_vocab", "readout_reference"]


@njit(cache=True, fastmath=_FAST, error_model="numpy")
def _kernel_forward(kmat, av, bias, iq, ids, eps, y, num, den):  # pragma: no cover - jitted
    nb, nq = iq.shape
    n = ids.shape[1]
    for b in range(nb):
        for i in range(nq):
            u = iq[b, i]
            top = 0.0
            bottom = 0.0
            for j in range(n):
                w = ids[b, j]
                top += kmat[u, w] * av[u, w]
                bottom += kmat[u, w]
            num[b, i] = top
            den[b, i] = bottom
            y[b, i] = top / (bottom + eps) + bias[u]


@njit(cache=True, fastmath=_FAST, error_model="numpy")
def _kernel_backward(kmat, av, iq, ids, eps, num, den, g, gk, gav, gbias):  # pragma: no cover
    nb, nq = iq.shape
    n = ids.shape[1]
    for b in range(nb):
        for i in range(nq):
            u = iq[b, i]
            gi = g[b, i]
            inv = 1.0 / (den[b, i] + eps)
            ratio = num[b, i] * inv * inv
            gbias[u] += gi
            for j in range(n):
                w = ids[b, j]
                gk[u, w] += gi * (av[u, w] * inv - ratio)
                gav[u, w] += gi * kmat[u, w] * inv


@njit(cache=True, fastmath=_FAST, error_model="numpy")
def _softmax_forward(s, av, bias, iq, ids, y, wts, mean):  # pragma: no cover - jitted
    nb, nq = iq.shape
    n = ids.shape[1]
    for b in range(nb):
        for i in range(nq):
            u = iq[b, i]
            for j in range(n):
                wts[b, i, j] = s[u, ids[b, j]]
            softmax_in_place(wts, b, i, n)
            acc = 0.0
            for j in range(n):
                acc += wts[b, i, j] * av[u, ids[b, j]]
            mean[b, i] = acc
            y[b, i] = acc + bias[u]


@njit(cache=True, fastmath=_FAST, error_model="numpy")
def _softmax_backward(av, iq, ids, mean, wts, g, gs, gav, gbias):  # pragma: no cover
    nb, nq = iq.shape
    n = ids.shape[1]
    for b in range(nb):
        for i in range(nq):
            u = iq[b, i]
            gi = g[b, i]
            gbias[u] += gi
            for j in range(n):
                w = ids[b, j]
                wij = wts[b, i, j]
                gs[u, w] += gi * wij * (av[u, w] - mean[b, i])
                gav[u, w] += gi * wij


class _KernelReadout(torch.autograd.Function):
    @staticmethod
    def forward(ctx, kmat, av, bias, iq, ids, eps):
        kmat, av, bias = (t.detach().contiguous() for t in (kmat, av, bias))
        y, num, den = (kmat.new_empty(iq.shape) for _ in range(3))
        iqn, idn = iq.contiguous().numpy(), ids.contiguous().numpy()
        arrays = (kmat.numpy(), av.numpy(), bias.numpy(), iqn, idn, eps)
        _kernel_forward(*arrays, y.numpy(), num.numpy(), den.numpy())
        ctx.saved = (kmat, av, iqn, idn, eps, num, den)
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        kmat, av, iqn, idn, eps, num, den = ctx.saved
        gk, gav = torch.zeros_like(kmat), torch.zeros_like(av)
        gbias = kmat.new_zeros(kmat.shape[0])
        arrays = (kmat.numpy(), av.numpy(), iqn, idn, eps, num.numpy(), den.numpy())
        _kernel_backward(*arrays, g.contiguous().numpy(), gk.numpy(), gav.numpy(), gbias.numpy())
        return gk, gav, gbias, None, None, None


class _VocabSoftmaxReadout(torch.autograd.Function):
    @staticmethod
    def forward(ctx, s, av, bias, iq, ids):
        s, av, bias = (t.detach().contiguous() for t in (s, av, bias))
        y, mean = s.new_empty(iq.shape), s.new_empty(iq.shape)
        wts = s.new_empty((*iq.shape, ids.shape[1]))
        iqn, idn = iq.contiguous().numpy(), ids.contiguous().numpy()
        arrays = (s.numpy(), av.numpy(), bias.numpy(), iqn, idn)
        _softmax_forward(*arrays, y.numpy(), wts.numpy(), mean.numpy())
        ctx.saved = (av, bias, iqn, idn, mean, wts)
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, g):
        av, bias, iqn, idn, mean, wts = ctx.saved
        gs, gav, gbias = torch.zeros_like(av), torch.zeros_like(av), torch.zeros_like(bias)
        arrays = (av.numpy(), iqn, idn, mean.numpy(), wts.numpy(), g.contiguous().numpy())
        _softmax_backward(*arrays, gs.numpy(), gav.numpy(), gbias.numpy())
        return gs, gav, gbias, None, None


def _jitted(*tensors) -> bool:
    first = tensors[0]
    return first.dtype in (torch.float32, torch.float64) and all(
        t.device.type == "cpu" and t.dtype == first.dtype for t in tensors
    )


def readout_reference(kind: str, mat, av, bias, iq, ids, eps: float = 0.0):
    """Both readouts in torch operations (any device, any order of derivatives).

    ``kind`` is ``kernel`` (``mat`` is ``K``) or ``softmax`` (``mat`` is ``S``).
    """
    v = mat.shape[0]
    pairs = iq.unsqueeze(2) * v + ids.unsqueeze(1)
    m, a = mat.reshape(-1)[pairs], av.reshape(-1)[pairs]
    if kind == "kernel":
        y = (m * a).sum(-1) / (m.sum(-1) + eps)
    else:
        y = (torch.softmax(m, -1) * a).sum(-1)
    return y + bias[iq]


def kernel_readout(kmat, av, bias, iq, ids, eps: float):
    """``y_bi = sum_j K[u, w_j] AV[u, w_j] / (sum_j K[u, w_j] + eps) + bias[u]``.

    Parameters
    ----------
    kmat, av : torch.Tensor
        ``[V, V]`` kernel and ``<a, v>`` matrices on the vocabulary.
    bias : torch.Tensor
        ``[V]``.
    iq, ids : torch.Tensor
        Query ids ``[B, Nq]`` and key ids ``[B, N]`` (int64).
    eps : float
        The normalizer's epsilon.

    Returns
    -------
    torch.Tensor
        ``[B, Nq]``: the jitted kernel on the CPU in float32/float64 (first
        derivatives), else :func:`readout_reference`.
    """
    if _jitted(kmat, av, bias):
        return _KernelReadout.apply(kmat, av, bias, iq, ids, float(eps))
    return readout_reference("kernel", kmat, av, bias, iq, ids, eps)


def softmax_readout_vocab(s, av, bias, iq, ids):
    """``y_bi = sum_j softmax_j(S[u, w_j]) AV[u, w_j] + bias[u]`` (see :func:`kernel_readout`)."""
    if _jitted(s, av, bias):
        return _VocabSoftmaxReadout.apply(s, av, bias, iq, ids)
    return readout_reference("softmax", s, av, bias, iq, ids)
