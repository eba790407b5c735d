"""The `trained` protocol against `kernel` per sketch coordinate (issue #31).

Run: python benchmarks/bench_trained.py [--inputs N] [--repeat R] [--json PATH]

On F(16, 3), a family of the capacity suite (docs/capacity.md), the engine alone
(``Engine.run`` on prebuilt data tokens, the family's fixed tokens shared, warm,
min of repeats, numba's threads) runs:

- ``trained:`` models of the capacity suite's shape (``elu1``, one head, feature
  rank 1, value width 16: ``E = r (d + 1) = 17`` coordinates per layer), with one
  and two layers; seeded random weights, calibrated to ``lo = 0, span = 1`` (the
  speed does not depend on the values);
- ``kernel:values=blocks`` (``E = r (q + 1) = 17`` coordinates, the same shape) and
  ``kernel`` (identity values, ``E = m + 1 = 53``).

The rate per coordinate is the time per input divided by the sketch coordinates
per input (``L H E``): what the issue asks to be equal.  The ratio column is the
trained model's time per coordinate over the kernel head's.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numba
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ratios import best_of, report  # noqa: E402

from sketchsim.sketch import HardFamily  # noqa: E402
from sketchsim.sketch.engine import Engine  # noqa: E402
from sketchsim.sketch.plugins import resolve_spec  # noqa: E402
from sketchsim.sketch.trained import (  # noqa: E402
    HEAD_ARRAYS,
    head_entries,
    load_weights,
    save_weights_file,
    trained_plan,
)

Q, S, R, D, FMAP = 16, 3, 1, 16, "elu1"


def random_model(path, fam, layers: int, seed: int = 0):
    """A seeded random ``elu1`` model of the capacity suite's shape, as a weights file."""
    rng = np.random.default_rng(seed)
    E = head_entries(R, D, FMAP)
    dims = {"r": R, "d": D, "m": fam.m, "E": E}
    arrays = {}
    for lay in range(layers):
        for name, shape in HEAD_ARRAYS.items():
            arrays[f"L{lay}.H0.{name}"] = rng.normal(0, 0.5, tuple(dims[s] for s in shape))
        arrays[f"L{lay}.H0.lo"] = np.zeros(E)
        arrays[f"L{lay}.H0.span"] = np.ones(E)
    arrays["wb"], arrays["bb"] = rng.normal(0, 0.3, fam.m), rng.normal(0, 1, 1)
    arch = dict(layers=layers, heads=1, rank=R, value_width=D, feature_map=FMAP, m=fam.m)
    header = {
        "architecture": {**arch, "eps": 1e-6},
        "family": {"name": "hard", "q": fam.q, "s": fam.s, "seed": fam.seed, "options": {}},
    }
    save_weights_file(path, header, arrays)
    return load_weights(path)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--inputs", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    fam = HardFamily(Q, S, seed=0)
    ctx = fam.context()
    T = fam.sample_answers(args.inputs)
    tokens, fixed = fam.variable_tokens(T), fam.fixed_tokens()
    load = os.getloadavg()[0]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        plans = [
            (f"trained elu1 L={L}", trained_plan(ctx, random_model(f"{tmp}/m{L}.npz", fam, L), 8))
            for L in (1, 2)
        ]
    for spec in ("kernel:values=blocks", "kernel"):
        proto, params, _ = resolve_spec(spec)
        plans.append((spec, proto.plan(ctx, params)))
    for name, plan in plans:
        engine = Engine(plan, ctx, name)
        engine.run(tokens[:256], fixed=fixed)  # compile, check the contract
        seconds = best_of(lambda e=engine: e.run(tokens, fixed=fixed), args.repeat)
        coords = sum(layer.symbols for layer in plan.layers)
        per_input = seconds / args.inputs
        rows.append(
            {"protocol": name, "coordinates": coords, "us_per_input": per_input * 1e6,
             "ns_per_coordinate": per_input / coords * 1e9}
        )  # fmt: skip
        print(f"  {name:<24} {coords:4d} coordinates  {per_input * 1e6:8.2f} us/input  "
              f"{per_input / coords * 1e9:8.1f} ns/coordinate", flush=True)  # fmt: skip
    kernel = {r["protocol"]: r for r in rows}["kernel:values=blocks"]
    report(
        "bench_trained",
        [
            (f"{r['protocol']} per coordinate", r["ns_per_coordinate"] * 1e-9,
             "kernel:values=blocks", kernel["ns_per_coordinate"] * 1e-9)
            for r in rows if r["protocol"].startswith("trained")
        ],
    )  # fmt: skip
    if args.json:
        from sketchsim.results import write_json_atomic

        write_json_atomic(
            args.json,
            {
                "family": f"F({Q}, {S})",
                "inputs": args.inputs,
                "repeat": args.repeat,
                "threads": numba.config.NUMBA_NUM_THREADS,
                "load_average_start": load,
                "load_average_end": os.getloadavg()[0],
                "rows": rows,
                "time_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
            },
        )
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
