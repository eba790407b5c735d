"""Full-batch, seeded training of a head on a fixed family; stops when exact.

The model that :func:`fit` returns is the model its metrics describe: exactness
is checked on the output of the current parameters *before* the optimizer
step, and training stops there without stepping.

Inputs that repeat few tokens are computed on their vocabulary
(:mod:`sketchsim.experiments.vocabulary`), and Adam runs on one flat buffer of
all parameters (:mod:`sketchsim.experiments.optim`).
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass

import torch

from sketchsim.config import EXACT_TOLERANCE
from sketchsim.experiments.models import predict
from sketchsim.experiments.optim import FlatAdam, lr_factor
from sketchsim.experiments.vocabulary import Vocabulary
from sketchsim.minip.token_ids import token_ids

__all__ = ["LOSSES", "TrainResult", "metrics", "fit", "pick_device", "token_ids", "loss_fn"]

#: Training losses: mean squared error, and a smooth maximum of the squared
#: errors (a minimax loss: it pushes the worst input, which is what "every
#: scored position within 1/2" is about).
LOSSES = ("mse", "minimax")

#: Temperature of the smooth maximum in the ``minimax`` loss (squared-error units).
MINIMAX_TAU = 1.0


@dataclass
class TrainResult:
    """Final metrics and cost of one training run (metrics of the returned model)."""

    sequence_error: float
    position_error: float
    max_abs_error: float
    steps: int
    seconds: float
    device: str
    finite: bool = True


#: Environment variable naming the device that ``auto`` picks (``cpu`` or ``cuda``); the
#: test suite sets it from ``SKETCHSIM_TEST_DEVICE`` (tests/conftest.py).
DEVICE_ENV = "SKETCHSIM_DEVICE"


def pick_device(name: str = "auto") -> torch.device:
    """The torch device of a run.

    Parameters
    ----------
    name : {"auto", "cpu", "cuda"}
        ``auto`` picks ``$SKETCHSIM_DEVICE`` when it is set, else CUDA when present,
        else the CPU.

    Raises
    ------
    SketchsimError
        CUDA was asked for and is not available, or ``$SKETCHSIM_DEVICE`` is neither
        ``cpu`` nor ``cuda``.
    """
    from sketchsim.errors import SketchsimError

    if name == "auto":
        name = os.environ.get(DEVICE_ENV, "") or ("cuda" if torch.cuda.is_available() else "cpu")
        if name not in ("cpu", "cuda"):
            raise SketchsimError(f"{DEVICE_ENV}={name!r}: expected cpu or cuda")
    if name == "cuda" and not torch.cuda.is_available():
        raise SketchsimError("CUDA is not available (device cuda was requested)")
    return torch.device(name)


def metrics(y: torch.Tensor, t: torch.Tensor) -> tuple[float, float, float]:
    """(sequence error rate, position error rate, max abs error).

    A position is right only when ``|y - t| < 1/2`` holds: a non-finite output
    (NaN or infinity) is wrong, and then the max abs error is ``inf``.
    """
    err = (y - t).abs()
    right = err < EXACT_TOLERANCE  # False for NaN: never counted as exact
    wrong = ~right
    finite = bool(torch.isfinite(err).all())
    mx = float(err.max()) if finite else math.inf
    if err.numel() == 0:
        return 0.0, 0.0, 0.0
    return float(wrong.any(-1).float().mean()), float(wrong.float().mean()), mx


def loss_fn(y: torch.Tensor, t: torch.Tensor, kind: str = "mse") -> torch.Tensor:
    """The training loss over every scored position (see :data:`LOSSES`)."""
    sq = (y - t) ** 2
    if kind == "mse":
        return sq.mean()
    if kind == "minimax":
        flat = sq.flatten()
        return MINIMAX_TAU * (torch.logsumexp(flat / MINIMAX_TAU, 0) - math.log(flat.numel()))
    raise ValueError(f"unknown loss {kind!r}; choose one of {LOSSES}")


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
    loss: str = "mse",
    optimizer: str = "adam",
    warmup: int = 0,
    cosine: bool = False,
    clip: float | None = None,
    weight_decay: float = 0.0,
    stop_below: float = EXACT_TOLERANCE,
) -> TrainResult:
    """Train ``model`` full-batch until every scored position is exact.

    Parameters
    ----------
    model : torch.nn.Module
        Called as ``model(x, ids)``; trained in place.
    x, ids, t : torch.Tensor
        Tokens ``[B, N, m]``, token ids ``[B, N]`` (or None) and targets of the
        scored positions: all of them, or only position ``scored`` (0-based)
        as ``[B, 1]``.
    steps : int
        Largest number of optimizer steps.
    loss : str
        One of :data:`LOSSES`.
    optimizer : str
        ``adam`` or ``adamw`` (with ``weight_decay``).
    warmup, cosine, clip :
        Linear warm-up steps, cosine decay after it, gradient-norm clipping.
    stop_below : float
        Stop once the max abs error on the training set is below this (default
        1/2: as soon as it is exact; smaller values train on to a margin).

    Returns
    -------
    TrainResult
        Metrics of the model as returned. Exactness is checked before every
        optimizer step on the output of the current parameters; a run that
        stops early is therefore exact, and ``steps`` counts the optimizer
        steps taken.
    """
    dev = pick_device(device)
    torch.manual_seed(seed)
    model = model.to(dev)
    x, t = x.to(dev), t.to(dev)
    ids = None if ids is None else ids.to(dev)
    if optimizer not in ("adam", "adamw"):
        raise ValueError(f"unknown optimizer {optimizer!r}; choose adam or adamw")
    opt = FlatAdam(
        model.parameters(), lr, weight_decay=weight_decay, decoupled=optimizer == "adamw"
    )
    voc = Vocabulary.of(x, ids)
    start = time.perf_counter()
    taken = 0
    while True:
        opt.zero_grad()
        y = _scored(predict(model, x, ids, voc), scored)
        seq, pos, mx = metrics(y.detach(), t)
        stop = (seq == 0.0 and mx < stop_below) or taken >= steps or not math.isfinite(mx)
        if stop and voc is not None:
            # report (and stop on) the numbers of model(x, ids) itself, not of
            # the vocabulary path, whose sums may differ in the last bit
            with torch.no_grad():
                seq, pos, mx = metrics(_scored(model(x, ids), scored), t)
            stop = (seq == 0.0 and mx < stop_below) or taken >= steps or not math.isfinite(mx)
        if stop:
            break
        loss_fn(y, t, loss).backward()
        if clip:
            opt.clip_grad_norm(clip)
        opt.step(lr_factor(taken, steps, warmup, cosine))
        taken += 1
    return TrainResult(
        seq, pos, mx, taken, time.perf_counter() - start, str(dev), math.isfinite(mx)
    )
