"""The ``K``-bit register in torch, for training in fixed point: the same rounding as the
engine's :func:`sketchsim.sketch.registers.register` (docs/theory.md 5.2, 5.3).

``code = clip(floor((x - lo) / step + 1/2), 0, top)`` (NaN: 0), read back as
``lo + step code``, with ``step = span / top`` (1 where ``span = 0``).  The causal
models round their states with :func:`register_values`, the kernel models their
tokens' symbols with :func:`register_codes`; the tests compare both with the engine.
"""

from __future__ import annotations

import torch

__all__ = ["register_codes", "register_values", "register_steps"]


def register_steps(span: torch.Tensor, top: float) -> torch.Tensor:
    """Each register's step: ``span / top``, 1 where ``span`` is 0."""
    return torch.where(span > 0, span / top, torch.ones_like(span))


def register_codes(x: torch.Tensor, lo, step, top: float) -> torch.Tensor:
    """``clip(floor((x - lo) / step + 1/2), 0, top)``, NaN to 0 (floats, differentiable
    nowhere: quantization-aware training passes gradients around it)."""
    code = torch.floor((x - lo) / step + 0.5)
    return torch.nan_to_num(code, nan=0.0).clamp(0.0, top)


def register_values(x: torch.Tensor, lo, step, top: float) -> torch.Tensor:
    """What ``x``'s register reads back as: ``lo + step code``."""
    return lo + step * register_codes(x, lo, step, top)
