"""Full-batch, seeded training of a head on a fixed family; stops when exact."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import torch

__all__ = ["TrainResult", "metrics", "fit", "pick_device", "token_ids"]


@dataclass
class TrainResult:
    """Final metrics and cost of one training run."""

    sequence_error: float
    position_error: float
    max_abs_error: float
    steps: int
    seconds: float
    device: str


def pick_device(name: str = "auto") -> torch.device:
    """``auto`` picks CUDA when present, else CPU."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        from sketchsim.errors import SketchsimError

        raise SketchsimError("--device cuda requested but CUDA is not available")
    return torch.device(name)


def token_ids(tokens: np.ndarray) -> tuple[np.ndarray, int]:
    """Ids ``[B, N]`` of distinct tokens and the vocabulary size (for the table map)."""
    flat = np.ascontiguousarray(tokens.reshape(-1, tokens.shape[-1]).astype(np.uint8))
    _, ids = np.unique(flat.view(np.dtype((np.void, flat.shape[1]))), return_inverse=True)
    return ids.reshape(tokens.shape[:-1]), int(ids.max()) + 1 if ids.size else 0


def metrics(y: torch.Tensor, t: torch.Tensor) -> tuple[float, float, float]:
    """(sequence error rate, position error rate, max abs error); wrong = ``|y - t| >= 1/2``."""
    err = (y - t).abs()
    wrong = err >= 0.5
    return float(wrong.any(-1).float().mean()), float(wrong.float().mean()), float(err.max())


def _scored(y, scored):
    return y if scored is None else y[:, scored : scored + 1]


def fit(
    model,
    x,
    ids,
    t,
    steps: int = 2000,
    lr: float = 0.03,
    seed: int = 0,
    device: str = "cpu",
    scored: int | None = None,
) -> TrainResult:
    """Train ``model`` with Adam on MSE until every scored position is exact.

    ``t`` holds the targets of the scored positions: all of them, or only
    position ``scored`` (0-based) when given, as ``[B, 1]``.
    """
    dev = pick_device(device)
    torch.manual_seed(seed)
    model = model.to(dev)
    x, t = x.to(dev), t.to(dev)
    ids = None if ids is None else ids.to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    start = time.perf_counter()
    step = 0
    for step in range(1, steps + 1):
        opt.zero_grad()
        y = _scored(model(x, ids), scored)
        loss = ((y - t) ** 2).mean()
        loss.backward()
        opt.step()
        if step % 25 == 0 and metrics(y.detach(), t)[0] == 0.0:
            break
    with torch.no_grad():
        seq, pos, mx = metrics(_scored(model(x, ids), scored), t)
    return TrainResult(seq, pos, mx, step, time.perf_counter() - start, str(dev))
