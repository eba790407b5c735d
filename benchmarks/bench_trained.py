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

The peer a user would write for the trained model is its batched NumPy forward
(:func:`numpy_trained`, 4,096 inputs at a time, from the packed tokens to the
answers; measured in the same run), and the share of inputs on which its answers
equal the engine's is printed beside it (the float sums run in other orders).
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

from sketchsim.minip.bits import unpack_bits  # noqa: E402
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

Q, S, R, D, FMAP, BITS = 16, 3, 1, 16, "elu1", 8


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


def numpy_trained(weights, fam, packed, bits: int, chunk: int = 4096) -> np.ndarray:
    """The answers a NumPy user would compute from the packed tokens ``[B, N, words]``:
    the model's batched forward on every token of ``chunk`` inputs at a time, the
    state through the engine's fixed-point format (per-token codes, summed,
    saturated; ``sketchsim/sketch/trained.py``), only the queries' readout kept."""
    a = weights.arch
    L, H, eps = a["layers"], a["heads"], a["eps"]
    W = weights.arrays
    top = 2.0**bits - 1
    out = []
    for lo_i in range(0, packed.shape[0], chunk):
        u = 2.0 * unpack_bits(packed[lo_i : lo_i + chunk], fam.m) - 1.0
        N = u.shape[1]
        y = u[:, : fam.q] @ W["wb"] + W["bb"][0]
        for lay in range(L):
            delta = np.zeros_like(u) if lay < L - 1 else None
            for h in range(H):
                g = {k: W[f"L{lay}.H{h}.{k}"] for k in HEAD_ARRAYS}
                fk = elu1(u @ g["wk"].T + g["bk"])
                v = u @ g["wv"].T + g["bv"]
                c = np.concatenate([fk[..., :, None] * v[..., None, :], fk[..., :, None]], -1)
                c = c.reshape(u.shape[0], N, -1)
                step = np.where(g["span"] > 0, g["span"] / top, 1.0)
                code = np.clip(np.floor((c - g["lo"]) / step + 0.5), 0, top).sum(1)
                state = (step * np.minimum(code, top) + N * g["lo"]).reshape(u.shape[0], R, D + 1)
                uq = u if delta is not None else u[:, : fam.q]
                fq = elu1(uq @ g["wq"].T + g["bq"])
                num = np.einsum("bir,brc->bic", fq, state[..., :D])
                num /= (np.einsum("bir,br->bi", fq, state[..., D]) + eps)[..., None]
                av = uq[:, : fam.q] @ g["wa"].T + g["ba"]
                y = y + (av * num[:, : fam.q]).sum(-1)
                if delta is not None:
                    delta += num @ g["wu"].T
            if delta is not None:
                u = u + delta
        ans = np.clip(np.floor(y + 0.5), -1.0, fam.s + 1.0)
        out.append(np.where(np.isnan(y), -1, ans).astype(np.int64))
    return np.concatenate(out)


def elu1(z):
    """The ``elu1`` feature map, ``elu(z) + 1``."""
    return np.where(z > 0, z + 1.0, np.exp(np.minimum(z, 0.0)))


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
        models = {L: random_model(f"{tmp}/m{L}.npz", fam, L) for L in (1, 2)}
    plans = [(f"trained elu1 L={L}", trained_plan(ctx, w, BITS)) for L, w in models.items()]
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
    packed = fam.tokens(T)
    peers = []
    for L, w in models.items():
        ours = Engine(plans[L - 1][1], ctx, "t").run(tokens, fixed=fixed).answers
        theirs = numpy_trained(w, fam, packed, BITS)
        seconds = best_of(lambda w=w: numpy_trained(w, fam, packed, BITS), args.repeat)
        peers.append(
            {"protocol": f"trained elu1 L={L}", "numpy_us_per_input": seconds / args.inputs * 1e6,
             "answers_agree": float((ours == theirs).all(axis=1).mean())}
        )  # fmt: skip
        print(f"  NumPy peer, L={L}: {seconds / args.inputs * 1e6:8.2f} us/input, answers agree "
              f"on {peers[-1]['answers_agree']:.2%} of inputs", flush=True)  # fmt: skip
    by_name = {r["protocol"]: r for r in rows}
    kernel = by_name["kernel:values=blocks"]
    report(
        "bench_trained",
        [
            (f"{r['protocol']} per coordinate", r["ns_per_coordinate"] * 1e-9,
             "kernel:values=blocks", kernel["ns_per_coordinate"] * 1e-9)
            for r in rows if r["protocol"].startswith("trained")
        ]
        + [
            (f"{p['protocol']} per input", by_name[p["protocol"]]["us_per_input"] * 1e-6,
             "NumPy batched forward", p["numpy_us_per_input"] * 1e-6)
            for p in peers
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
                "numpy_peer": peers,
                "time_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
            },
        )
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
