"""One training step of a sum-state causal model (issue #45) against the token loop.

Run: python benchmarks/bench_causal_training.py [--inputs N] [--repeat R] [--quick]

The capacity frontier's model at the main job's scale: linear attention, elu1
features, one layer, one head, rank 1, value width 64, on F(64, 7) (65 tokens of 456
bits), one full-batch Adam step (forward, mean squared error, backward, update) on
``--inputs`` seeded inputs, float32, one torch thread.  Times are warm, min of repeats:

- sketchsim, float: ``CausalModel.forward`` in one pass per layer (cumsum states; the
  last layer reads the shared queries with one matrix product);
- sketchsim, QAT at K = 4: the batch's register calibration (``state_range``: the last
  layer's extremes from the data states and the queries' prefix sums) and the forward
  that rounds each token's state in turn on terms computed in one pass;
- sketchsim, GLA (rank 1, value width 64) in float: the shared queries read each
  input's cut state through one affine map (the queries run on the zero and unit
  states only);
- peer, both: the token loop of the same model (``CausalLayer.step`` per token, the
  shared query tokens projected once, the calibration over every visited state),
  which is what the model computes written the obvious way (a torch user's loop).

Before timing, each pair's outputs are compared (largest difference printed).
"""

from __future__ import annotations

import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from ratios import best_of, report, size_args  # noqa: E402

BITS = 4
CASES = [("linear", 0, "float"), ("linear", BITS, f"QAT K={BITS}"), ("gla", 0, "float")]


def _token_loop(model):
    """The same model forced onto the token loop (its one-pass and affine paths off)."""
    model.kind_is_sum = lambda: False
    model._affine_in_state = lambda *args: False
    return model


def main() -> None:
    args = size_args(__doc__)
    import torch

    from sketchsim.experiments.capacity_suite import family_answers, input_tensor
    from sketchsim.experiments.causal_models import (
        CausalModel,
        causal_arch,
        causal_qat_quantizer,
    )
    from sketchsim.sketch.family_plugins import make_family

    torch.set_num_threads(1)
    fam = make_family("hard", 64, 7)
    T = family_answers(fam, args.inputs, 0, 11)
    X = input_tensor(fam, T)
    t = torch.as_tensor(T.astype(np.float32))

    def make(kind: str, loop: bool):
        torch.manual_seed(0)
        model = CausalModel(causal_arch(kind, fam.m, 1, 1, 1, 64), fam.q)
        return _token_loop(model) if loop else model

    def stepper(model, bits: int):
        opt = torch.optim.Adam(model.parameters(), 1e-3)
        quantize = causal_qat_quantizer(model, bits) if bits else None

        def step():
            y = model(X, quantize=quantize)[:, : fam.q]
            loss = ((y - t) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()

        return step

    rows = []
    for kind, bits, label in CASES:
        fast, loop = make(kind, False), make(kind, True)
        with torch.no_grad():
            qf = causal_qat_quantizer(fast, bits) if bits else None
            ql = causal_qat_quantizer(loop, bits) if bits else None
            gap = (fast(X, quantize=qf) - loop(X, quantize=ql)).abs().max()
        print(f"{label}: largest output difference, one pass vs token loop: {float(gap):.2e}")
        ours = best_of(stepper(fast, bits), args.repeat)
        theirs = best_of(stepper(loop, bits), args.repeat)
        work = f"F(64,7) {kind} d64 {args.inputs} inputs, {label}"
        rows.append((work, ours, "token loop (torch)", theirs))
    report("bench_causal_training", rows)


if __name__ == "__main__":
    main()
