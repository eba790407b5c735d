"""Sketch-engine throughput at q=64, s=7: jitted engine vs the plain-Python engine.

Run: python benchmarks/bench_engine.py [--quick]
Both engines run the same protocol plan on the same inputs in this run; the
Python engine runs fewer inputs (it is slow) and its rate is scaled per input.
"end-to-end" is `sketchsim.transcript.measure`: building the inputs in chunks,
the engine, grouping transcripts and searching for collisions.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from sketchsim.plugins import resolve_spec
from sketchsim.sketch import HardFamily
from sketchsim.sketch.engine import Engine
from sketchsim.transcript import measure


def rate(engine, tokens, repeat=3):
    best = min(_timed(engine, tokens) for _ in range(repeat))
    return tokens.shape[0] / best


def _timed(engine, tokens):
    t = time.perf_counter()
    engine.run(tokens)
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    fam = HardFamily(64, 7, seed=0)
    n_jit = 20_000 if args.quick else 200_000
    n_py = 20 if args.quick else 100
    T = fam.sample_answers(n_jit)
    tokens = fam.tokens(T)
    t = time.perf_counter()
    fam.tokens(T)
    build = n_jit / (time.perf_counter() - t)
    print(
        f"F(64, 7): m = {fam.m}, N = {fam.n_tokens}; "
        f"building inputs into fresh arrays: {build:,.0f} inputs/s"
    )
    for spec in ("block-counts", "kernel", "kernel:values=blocks,bits=7"):
        proto, params, _ = resolve_spec(spec)
        plan = proto.plan(fam.context(), params)
        jit = Engine(plan, fam.context(), spec)
        t = time.perf_counter()
        jit.run(tokens[:8])
        compile_s = time.perf_counter() - t
        py = Engine(plan, fam.context(), spec, python=True)
        a, b = jit.run(tokens[:n_py]), py.run(tokens[:n_py])
        assert np.array_equal(a.fingerprints, b.fingerprints)
        assert np.array_equal(a.answers, b.answers)
        r_jit = rate(jit, tokens)
        r_py = rate(py, tokens[:n_py], repeat=1)
        t = time.perf_counter()
        measure(fam, T, proto, params)
        r_all = n_jit / (time.perf_counter() - t)
        print(
            f"  {spec:<28} jitted {r_jit:>11,.0f} inputs/s   python {r_py:>8,.1f} inputs/s   "
            f"ratio {r_jit / r_py:>7,.0f}x   end-to-end {r_all:>9,.0f} inputs/s   "
            f"(compile {compile_s:.1f} s)"
        )


if __name__ == "__main__":
    main()
