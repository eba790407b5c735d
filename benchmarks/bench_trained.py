"""The `trained` protocol against `kernel` per sketch coordinate (issue #31).

Run: python benchmarks/bench_trained.py [--inputs N] [--repeat R] [--json PATH]

On F(16, 3), a family of the capacity suite (docs/capacity.md), the engine alone
(``Engine.run`` on prebuilt data tokens, the family's fixed tokens shared, warm,
min of repeats, numba's threads) runs:

- ``trained:`` models (through the built-in protocol, as ``sketchsim capacity``
  runs them) of the capacity suite's shape (``elu1``, one head, feature
  rank 1, value width 16: ``E = r (d + 1) = 17`` coordinates per layer), with one
  and two layers; seeded random weights, calibrated to ``lo = 0, span = 1`` (the
  speed does not depend on the values);
- ``kernel:values=blocks`` (``E = r (q + 1) = 17`` coordinates, the same shape) and
  ``kernel`` (identity values, ``E = m + 1 = 53``).

The rate per coordinate is the time per input divided by the sketch coordinates
per input (``L H E``): what the issue asks to be equal.  The ratio column is the
trained model's time per coordinate over the kernel head's.

The peers a user would write for the trained model, measured in the same run,
4,096 inputs at a time from the packed tokens to the answers: its batched NumPy
forward over every token (:func:`numpy_trained`), and the same with the query
tokens' layer-1 work done once, as the engine does (:func:`numpy_trained_shared`).
The share of inputs on which their answers equal the engine's is printed beside
them (the float sums run in other orders).  The JSON names the commit of the
sketchsim it imported (run another tree with ``PYTHONPATH`` set to it).
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
from bench_main_job import tree_label  # noqa: E402
from ratios import best_of, report  # noqa: E402

import sketchsim  # noqa: E402
from sketchsim.minip.bits import unpack_bits  # noqa: E402
from sketchsim.sketch import HardFamily  # noqa: E402
from sketchsim.sketch.engine import Engine  # noqa: E402
from sketchsim.sketch.plugins import resolve_spec  # noqa: E402
from sketchsim.sketch.trained import (  # noqa: E402
    HEAD_ARRAYS,
    head_entries,
    load_weights,
    save_weights_file,
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


def _check_shape(weights):
    a = weights.arch
    shape = (a["heads"], a["rank"], a["value_width"], a["feature_map"])
    assert shape == (1, R, D, FMAP), f"the NumPy peers are written for this shape: {shape}"


def _codes(u, g, top):
    """Per-token fixed-point codes of one head's sketch entries (``[..., E]``, floats)."""
    fk = elu1(u @ g["wk"].T + g["bk"])
    v = u @ g["wv"].T + g["bv"]
    c = np.concatenate([fk[..., :, None] * v[..., None, :], fk[..., :, None]], -1)
    c = c.reshape(*u.shape[:-1], -1)
    step = np.where(g["span"] > 0, g["span"] / top, 1.0)
    return np.clip(np.floor((c - g["lo"]) / step + 0.5), 0, top), step


def _readout(fq, code, step, g, N, top, eps):
    """``num`` of one head for queries ``fq`` (``[B, n, r]``) from summed codes ``[B, E]``."""
    state = (step * np.minimum(code, top) + N * g["lo"]).reshape(code.shape[0], R, D + 1)
    num = np.einsum("bir,brc->bic", fq, state[..., :D])
    return num / (np.einsum("bir,br->bi", fq, state[..., D]) + eps)[..., None]


def _answers(y, s):
    ans = np.clip(np.floor(y + 0.5), -1.0, s + 1.0)
    return np.where(np.isnan(y), -1, ans).astype(np.int64)


def numpy_trained(weights, fam, packed, bits: int, chunk: int = 4096) -> np.ndarray:
    """The answers of the model's batched NumPy forward from the packed tokens
    ``[B, N, words]``, every token of ``chunk`` inputs at a time, the state through
    the engine's fixed-point format (per-token codes, summed, saturated;
    ``sketchsim/sketch/trained.py``), only the queries' readout kept."""
    _check_shape(weights)
    a, W = weights.arch, weights.arrays
    L, eps, top, q = a["layers"], a["eps"], 2.0**bits - 1, fam.q
    out = []
    for lo_i in range(0, packed.shape[0], chunk):
        u = 2.0 * unpack_bits(packed[lo_i : lo_i + chunk], fam.m) - 1.0
        y = u[:, :q] @ W["wb"] + W["bb"][0]
        out.append(_answers(_layers(W, u, y, range(L), q, top, eps), fam.s))
    return np.concatenate(out)


def _layers(W, u, y, layers, q, top, eps):
    """``y`` plus the readouts of ``layers`` (the last one: the queries only), from the
    residual stream ``u`` (``[B, N, m]``) entering the first of them."""
    N, last = u.shape[1], layers[-1]
    for lay in layers:
        g = {k: W[f"L{lay}.H0.{k}"] for k in HEAD_ARRAYS}
        code, step = _codes(u, g, top)
        uq = u[:, :q] if lay == last else u
        num = _readout(elu1(uq @ g["wq"].T + g["bq"]), code.sum(1), step, g, N, top, eps)
        y = y + ((u[:, :q] @ g["wa"].T + g["ba"]) * num[:, :q]).sum(-1)
        if lay != last:
            u = u + num @ g["wu"].T
    return y


def numpy_trained_shared(weights, fam, fixed, variable, bits: int, chunk: int = 4096):
    """:func:`numpy_trained` as a user who knows the family would write it: the query
    tokens (``fixed``, the same in every input) go through layer 1's features, codes,
    readout weights and output bias once; per input only the data token's, then (with
    more layers) every token from layer 2 on, which depends on layer 1's sketch."""
    _check_shape(weights)
    a, W = weights.arch, weights.arrays
    L, eps, top, q = a["layers"], a["eps"], 2.0**bits - 1, fam.q
    nf = fixed.shape[0]
    assert nf >= q, "the queries are among the fixed tokens"
    uf = 2.0 * unpack_bits(fixed[None], fam.m)[0] - 1.0  # [nf, m], once
    g0 = {k: W[f"L0.H0.{k}"] for k in HEAD_ARRAYS}
    code_f, step0 = _codes(uf, g0, top)
    code_f = code_f.sum(0)
    fq_f = elu1(uf @ g0["wq"].T + g0["bq"])
    av_q = uf[:q] @ g0["wa"].T + g0["ba"]
    y_q = uf[:q] @ W["wb"] + W["bb"][0]
    out = []
    for lo_i in range(0, variable.shape[0], chunk):
        ud = 2.0 * unpack_bits(variable[lo_i : lo_i + chunk], fam.m) - 1.0  # [B, nd, m]
        B, N = ud.shape[0], nf + ud.shape[1]
        code_d, _ = _codes(ud, g0, top)
        code = code_f + code_d.sum(1)
        if L == 1:
            num = _readout(np.broadcast_to(fq_f[:q], (B, q, R)), code, step0, g0, N, top, eps)
            out.append(_answers(y_q + (av_q * num).sum(-1), fam.s))
            continue
        fq = np.concatenate(
            [np.broadcast_to(fq_f, (B, nf, R)), elu1(ud @ g0["wq"].T + g0["bq"])], 1
        )
        num = _readout(fq, code, step0, g0, N, top, eps)
        y = y_q + (av_q * num[:, :q]).sum(-1)
        u = np.concatenate([np.broadcast_to(uf, (B, nf, fam.m)), ud], 1) + num @ g0["wu"].T
        out.append(_answers(_layers(W, u, y, range(1, L), q, top, eps), fam.s))
    return np.concatenate(out)


def elu1(z):
    """The ``elu1`` feature map, ``elu(z) + 1``."""
    return np.where(z > 0, z + 1.0, np.exp(np.minimum(z, 0.0)))


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--inputs", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    fam = HardFamily(Q, S, seed=0)
    ctx = fam.context()
    T = fam.sample_answers(args.inputs)
    tokens, fixed = fam.variable_tokens(T), fam.fixed_tokens()
    load = os.getloadavg()[0]
    rows = []
    plans, models = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for L in (1, 2):
            models[L] = random_model(f"{tmp}/m{L}.npz", fam, L)
            # through the built-in protocol, as `sketchsim capacity` runs it (a plan of
            # trained_plan alone would be a plug-in's: bounds-checked and not inlined)
            plans.append((f"trained elu1 L={L}", f"trained:weights={tmp}/m{L}.npz,bits={BITS}"))
        plans += [(spec, spec) for spec in ("kernel:values=blocks", "kernel")]
        for i, (name, spec) in enumerate(plans):
            proto, params, _ = resolve_spec(spec)
            plans[i] = (name, proto.plan(ctx, params))
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
        row = {"protocol": f"trained elu1 L={L}"}
        for key, fn in (
            ("numpy", lambda w=w: numpy_trained(w, fam, packed, BITS)),
            ("numpy_shared", lambda w=w: numpy_trained_shared(w, fam, fixed, tokens, BITS)),
        ):
            agree = float((ours == fn()).all(axis=1).mean())
            row[f"{key}_us_per_input"] = best_of(fn, args.repeat) / args.inputs * 1e6
            row[f"{key}_answers_agree"] = agree
            print(f"  NumPy peer ({key}), L={L}: {row[f'{key}_us_per_input']:8.2f} us/input, "
                  f"answers agree on {agree:.2%} of inputs", flush=True)  # fmt: skip
        peers.append(row)
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
             peer, p[f"{key}_us_per_input"] * 1e-6)
            for p in peers
            for key, peer in (("numpy", "NumPy forward"), ("numpy_shared", "NumPy, queries once"))
        ],
    )  # fmt: skip
    if args.json:
        from sketchsim.results import write_json_atomic

        write_json_atomic(
            args.json,
            {
                "family": f"F({Q}, {S})",
                "code": tree_label(os.path.dirname(os.path.dirname(sketchsim.__file__))),
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
