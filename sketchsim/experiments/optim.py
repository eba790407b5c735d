"""Adam and AdamW on one flat buffer: the training step of a tiny head without
the per-tensor bookkeeping of ``torch.optim``.

The heads trained here have a handful of small parameter tensors, and one step
of ``torch.optim.Adam`` costs about half a millisecond of Python and dispatch
per step on the CPU (more than the head's forward pass), plus a one-time import
of ``torch._dynamo`` (about 2 s) on the first optimizer built in a process.
:class:`FlatAdam` moves every parameter and its gradient into views of one
contiguous buffer each, so that a step is the same few elementwise operations
as torch's single-tensor Adam (``torch.optim.adam._single_tensor_adam``),
applied once to the whole buffer: the same arithmetic, element by element.
"""

from __future__ import annotations

import math

import torch

__all__ = ["FlatAdam"]


class FlatAdam:
    """Adam (or AdamW with ``decoupled=True``) over views of one flat buffer.

    Parameters
    ----------
    params : iterable of torch.nn.Parameter
        The parameters to train; after construction each one (and its
        ``.grad``) is a view into one contiguous buffer, so backward passes
        accumulate straight into the flat gradient.  All must share one dtype
        and device.
    lr : float
        Learning rate; :meth:`step` takes a factor for schedules.
    betas, eps : as in ``torch.optim.Adam``.
    weight_decay : float
        L2 penalty added to the gradient (Adam) or decoupled decay (AdamW).
    decoupled : bool
        AdamW's decoupled weight decay.
    """

    def __init__(
        self,
        params,
        lr: float,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        decoupled: bool = False,
    ):
        self.params = [p for p in params if p.requires_grad]
        if not self.params:
            raise ValueError("no trainable parameters")
        first = self.params[0]
        if any(p.dtype != first.dtype or p.device != first.device for p in self.params):
            raise ValueError("FlatAdam needs every parameter on one dtype and device")
        total = sum(p.numel() for p in self.params)
        self.flat = torch.empty(total, dtype=first.dtype, device=first.device)
        self.grad = torch.zeros_like(self.flat)
        offset = 0
        with torch.no_grad():
            for p in self.params:
                n = p.numel()
                view = self.flat[offset : offset + n].view_as(p)
                view.copy_(p)
                p.data = view
                p.grad = self.grad[offset : offset + n].view_as(p)
                offset += n
        self.exp_avg = torch.zeros_like(self.flat)
        self.exp_avg_sq = torch.zeros_like(self.flat)
        self.lr, self.betas, self.eps = lr, betas, eps
        self.weight_decay, self.decoupled = weight_decay, decoupled
        self.steps = 0

    def zero_grad(self) -> None:
        """Zero the flat gradient (the parameters' ``.grad`` are views of it)."""
        self.grad.zero_()

    def clip_grad_norm(self, max_norm: float) -> float:
        """Scale the gradient to a 2-norm of at most ``max_norm``, as
        ``torch.nn.utils.clip_grad_norm_``; returns the norm before clipping."""
        norm = float(torch.linalg.vector_norm(self.grad))
        coef = max_norm / (norm + 1e-6)
        if coef < 1.0:
            self.grad.mul_(coef)
        return norm

    @torch.no_grad()
    def step(self, lr_factor: float = 1.0) -> None:
        """One Adam step at learning rate ``lr * lr_factor``."""
        lr = self.lr * lr_factor
        beta1, beta2 = self.betas
        self.steps += 1
        param, grad = self.flat, self.grad
        if self.weight_decay != 0:
            if self.decoupled:
                param.mul_(1 - lr * self.weight_decay)
            else:
                grad = grad.add(param, alpha=self.weight_decay)
        self.exp_avg.lerp_(grad, 1 - beta1)
        self.exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        bias1 = 1 - beta1 ** float(self.steps)
        bias2_sqrt = (1 - beta2 ** float(self.steps)) ** 0.5
        denom = (self.exp_avg_sq.sqrt() / bias2_sqrt).add_(self.eps)
        param.addcdiv_(self.exp_avg, denom, value=-lr / bias1)


def lr_factor(step: int, steps: int, warmup: int, cosine: bool) -> float:
    """Linear warm-up over ``warmup`` steps, then constant or cosine decay to 0."""
    if warmup and step < warmup:
        return (step + 1) / warmup
    if not cosine:
        return 1.0
    span = max(steps - warmup, 1)
    return 0.5 * (1.0 + math.cos(math.pi * min(step - warmup, span) / span))
