"""Several capacity runs trained as one batched model (issue #45).

Runs that differ only in their seed and learning rate (:func:`batch_key`) have
models of one shape: :func:`train_capacity_batch` stacks their weights
(``torch.func.stack_module_state``), runs one ``vmap`` of the model's forward
over the stack, one backward of the summed losses (each model's gradient is
that of its own loss) and one Adam step on the stacked weights, with each
model's learning rate.  Each model follows :func:`~sketchsim.experiments.
capacity_suite.train_capacity` step by step: its own training inputs (drawn
with its seed), the same schedule (one-cycle's rate and momentum, or constant),
the same stop rule and ``--keep``; a model that stops is frozen while the
others go on.  The arithmetic is the same up to float rounding (a batched
matrix product rounds in its own order), so over a few steps a batched run's
row and weights equal its one-at-a-time ones up to float32 rounding
(tests/experiments/test_batched_training.py); over thousands of steps training
can amplify the difference, which is why rows say ``batched`` (how many models
trained together) and resume keys keep batched and single runs apart.

Batching pays where a step is many small operations: the causal kinds
(docs/benchmarks.md, "Seeds as one batched model"); the kernel heads' step is
already arithmetic, so :func:`batchable` leaves them, quantization-aware and
plug-in runs to :func:`train_capacity`.
"""

from __future__ import annotations

import copy
import math
import time
from dataclasses import replace

import numpy as np
import torch

from sketchsim.experiments.capacity_suite import (
    CapacitySpec,
    batch_key,
    batchable,
    build_model,
    family_answers,
    finish_run,
    input_tensor,
    scheduler,
)
from sketchsim.sketch.family_plugins import make_family

#: batch_key and batchable live with the specs (capacity_suite); re-exported here
__all__ = ["batch_key", "batchable", "train_capacity_batch"]


class _StackedAdam:
    """torch's single-tensor Adam (``torch.optim.Adam`` on the CPU) on stacked weights,
    model ``i`` at learning rate ``lrs[i]`` times the schedule's factor."""

    def __init__(self, params: dict, lrs: torch.Tensor, eps: float = 1e-8, beta2: float = 0.999):
        self.params, self.lrs, self.eps, self.beta2 = params, lrs, eps, beta2
        self.exp_avg = {k: torch.zeros_like(p) for k, p in params.items()}
        self.exp_avg_sq = {k: torch.zeros_like(p) for k, p in params.items()}
        self.steps = 0

    @torch.no_grad()
    def step(self, factor: float, beta1: float) -> None:
        self.steps += 1
        bias1 = 1 - beta1**self.steps
        bias2_sqrt = (1 - self.beta2**self.steps) ** 0.5
        for k, p in self.params.items():
            grad = p.grad
            if grad is None:  # a weight the loss does not reach: torch's Adam skips it too
                continue
            m, v = self.exp_avg[k], self.exp_avg_sq[k]
            m.lerp_(grad, 1 - beta1)
            v.mul_(self.beta2).addcmul_(grad, grad, value=1 - self.beta2)
            step_size = (self.lrs * factor / bias1).view(-1, *([1] * (p.dim() - 1)))
            denom = (v.sqrt() / bias2_sqrt).add_(self.eps)
            p.add_((-step_size) * m / denom)


def _schedule(spec: CapacitySpec):
    """``next() -> (factor, beta1)`` of each step: the rate over ``spec.lr`` and Adam's beta1,
    as :func:`~sketchsim.experiments.capacity_suite.scheduler` sets them on torch's Adam."""
    dummy = torch.zeros(1, requires_grad=True)
    opt = torch.optim.Adam([dummy], 1.0)
    sched = scheduler(opt, replace(spec, lr=1.0))

    def advance():
        group = opt.param_groups[0]
        now = (group["lr"], group["betas"][0])
        opt.step()  # no gradient: a no-op, so that the scheduler may step
        sched.step()
        return now

    return advance


def train_capacity_batch(specs: list[CapacitySpec], device: str = "cpu", save_to=None) -> list:
    """Train runs of one :func:`batch_key` as one batched model; their rows, in order.

    Each row is :func:`~sketchsim.experiments.capacity_suite.train_capacity`'s, with
    ``seconds`` the batch's training time over its models and ``batched`` their
    number.

    Raises
    ------
    ValueError
        The specs do not share a batch key, or one is not :func:`batchable`.
    """
    from torch.func import functional_call, stack_module_state, vmap

    lead = specs[0]
    if any(batch_key(s) != batch_key(lead) or not batchable(s) for s in specs):
        raise ValueError("a batch holds causal float runs that differ only in seed and lr")
    M, q = len(specs), lead.q
    fam = make_family(lead.family, lead.q, lead.s)
    Ts = [family_answers(fam, s.train_inputs, s.seed, 11) for s in specs]
    X = torch.stack([input_tensor(fam, T) for T in Ts]).to(device)
    t = torch.stack([torch.as_tensor(T.astype(np.float32)) for T in Ts]).to(device)
    models = [build_model(s, fam.m, fam.q).to(device) for s in specs]
    params, buffers = stack_module_state(models)
    base = copy.deepcopy(models[0]).to("meta")
    base.shared_queries = bool((X[:, :, : fam.q] == X[:1, :1, : fam.q]).all())
    forward = vmap(lambda p, b, x: functional_call(base, (p, b), (x,)))
    adam = _StackedAdam(params, torch.tensor([s.lr for s in specs], device=device))
    schedule = _schedule(lead)
    active = [True] * M
    stopped = [(0, math.inf)] * M  # (step, largest error) where each model stopped
    frozen: dict[int, dict] = {}  # a stopped model's weights, put back after every update
    best: list = [None] * M  # as train_capacity's: (right, -mse, step, error, weights)
    start = time.perf_counter()
    for step in range(lead.steps + 1):
        y = forward(params, buffers, X)[..., :q]
        miss = (y.detach() - t).abs()
        for i in (i for i in range(M) if active[i]):
            err = float(miss[i].max())
            if lead.keep == "best" and math.isfinite(err):
                score = (int((miss[i] < 0.5).all(1).sum()), -float((miss[i] ** 2).mean()))
                if best[i] is None or score > best[i][:2]:
                    best[i] = (*score, step, err, _member(params, buffers, i))
            if err < lead.stop_below or step == lead.steps or not math.isfinite(err):
                active[i], stopped[i] = False, (step, err)
                frozen[i] = _member(params, buffers, i)
        if not any(active):
            break
        losses = ((y - t) ** 2).mean((1, 2))
        for p in params.values():
            p.grad = None
        torch.where(torch.tensor(active, device=device), losses, 0.0).sum().backward()
        adam.step(*schedule())
        with torch.no_grad():
            for i, weights in frozen.items():
                for k, p in params.items():
                    p[i].copy_(weights[k])
    seconds = (time.perf_counter() - start) / M
    rows = []
    for i, spec in enumerate(specs):
        step, err = stopped[i]
        kept_step = step
        weights = frozen[i]
        if best[i] is not None and best[i][2] != step:
            kept_step, err, weights = best[i][2], best[i][3], best[i][4]
        _load(models[i], weights)
        row = finish_run(spec, fam, models[i], Ts[i], err, step, kept_step, seconds, device,
                         save_to, batched=True)  # fmt: skip
        rows.append({**row, "batched": M})
    return rows


def _member(params: dict, buffers: dict, i: int) -> dict:
    """Model ``i``'s weights and buffers, copied out of the stack."""
    return {k: v[i].detach().clone() for k, v in (*params.items(), *buffers.items())}


def _load(model, weights: dict) -> None:
    with torch.no_grad():
        for k, v in (*model.named_parameters(), *model.named_buffers()):
            v.copy_(weights[k])
