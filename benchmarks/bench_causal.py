"""The causal runner (issue #44) against the NumPy reference and a batched torch forward.

Run: python benchmarks/bench_causal.py [--inputs N] [--repeat R] [--quick]

Per architecture, a seeded random one-layer, one-head model (feature rank 2, value
width 16; Based: rank 2, so 7 features; window: 5 tokens) on F(16, 3) and, for
``linear``, F(64, 7) (rank 1, value width 64: the main job's family), at K = 8 bits
per state entry.  Times are warm, min of repeats, from packed tokens to answers:

- sketchsim: ``Engine.run`` of the ``trained`` plan (the jitted runner, numba's
  threads, the family's shared queries projected once);
- peer 1, the plain reference ``tests/naive.py::causal_outputs`` (Python loops over
  inputs and tokens; on 16 inputs, scaled to the batch): the naive reference;
- peer 2, the torch model of ``sketchsim.experiments.causal_models`` with the K-bit
  registers (``fixed_point_state``) in float64, batched over all inputs (the best a
  torch user would write; one torch thread per core as numba).

The share of inputs on which each peer's answers equal the engine's is printed.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))
from ratios import best_of, report, size_args  # noqa: E402

CASES = [  # (kind, q, s, r, d, window)
    ("linear", 16, 3, 2, 16, 0),
    ("based", 16, 3, 2, 16, 0),
    ("gla", 16, 3, 2, 16, 0),
    ("deltanet", 16, 3, 2, 16, 0),
    ("gated-deltanet", 16, 3, 2, 16, 0),
    ("mamba", 16, 3, 2, 16, 0),
    ("window", 16, 3, 2, 16, 5),
    ("linear", 64, 7, 1, 64, 0),
]
BITS = 8


def _model(tmp, kind, q, s, r, d, window):
    from weights_files import random_causal_weights

    from sketchsim.sketch.family_plugins import make_family

    fam = make_family("hard", q, s)
    path = os.path.join(tmp, f"{kind}-{q}.npz")
    return fam, random_causal_weights(path, fam, kind, 1, 1, r, d, window=window, scale=0.2)


def main() -> None:
    args = size_args(__doc__)
    import naive
    import numba
    import torch

    from sketchsim.experiments.capacity_suite import input_tensor
    from sketchsim.experiments.causal_models import (
        causal_from_weights,
        fixed_point_state,
    )
    from sketchsim.sketch.engine import Engine
    from sketchsim.sketch.trained import trained_plan

    torch.set_num_threads(numba.config.NUMBA_NUM_THREADS)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for kind, q, s, r, d, window in CASES:
            fam, w = _model(tmp, kind, q, s, r, d, window)
            T = fam.sample_answers(args.inputs)
            tokens, fixed = fam.variable_tokens(T), fam.fixed_tokens()
            engine = Engine(trained_plan(fam.context(), w, BITS), fam.context(), "trained")
            engine.run(tokens[:8], fixed=fixed)  # compiled
            ours = best_of(lambda e=engine, t=tokens, f=fixed: e.run(t, fixed=f), args.repeat)
            got = engine.run(tokens, fixed=fixed).answers

            few = 16
            X = input_tensor(fam, T[:few], torch.float64).numpy()
            t0 = time.perf_counter()
            ref = naive.causal_outputs(w, X, BITS)[2]
            naive_s = (time.perf_counter() - t0) * args.inputs / few
            same_naive = float((ref == got[:few]).all(1).mean())

            model = causal_from_weights(w)
            cal = [(w.arrays["L0.H0.lo"][None], w.arrays["L0.H0.span"][None])]
            quantize = fixed_point_state(BITS, cal)

            def torch_forward(model=model, fam=fam, T=T, quantize=quantize):
                with torch.no_grad():
                    y = model(input_tensor(fam, T, torch.float64), quantize=quantize)[:, : fam.q]
                return np.clip(np.floor(y.numpy() + 0.5), -1, fam.s + 1)

            torch_s = best_of(torch_forward, args.repeat)
            same_torch = float((torch_forward() == got).all(1).mean())
            label = f"{kind} F({q},{s}) r{r} d{d}" + (f" w{window}" if window else "")
            print(f"{label}: answers equal to the engine's: naive {same_naive:.3f}, "
                  f"torch {same_torch:.3f}")  # fmt: skip
            rows.append((label, ours, "naive causal_outputs", naive_s))
            rows.append((label, ours, "torch fixed point, batched", torch_s))
    report("bench_causal", rows)


if __name__ == "__main__":
    main()
