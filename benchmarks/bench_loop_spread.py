"""How far the engine's speed moves between two compilations of the same loop (issue #31).

Run: python benchmarks/bench_loop_spread.py [--loop-from PATH ...] [--protocols SPEC ...]
[--compiles K] [--inputs N] [--repeat R] [--json PATH]

LLVM lays out each compilation's machine code anew, so the same source compiled
twice can run a few percent apart. To tell a change of the engine loop from that
spread, this script compiles the loop of each protocol ``--compiles`` times in one
process, in memory (with :func:`sketchsim.sketch.loop.compiled`). It does so
for this tree's ``loop``, and for the ``loop`` function of each ``--loop-from``
file: a ``sketchsim/sketch/loop.py`` of another checkout, compiled with this
tree's protocol functions and helpers. Every compilation then runs
``Engine.run`` on the same inputs in turn (F(64, 7), the family's fixed tokens
shared, numba's threads), min over ``--repeat`` rounds. Every compilation's
answers and fingerprints are checked against the first one's.
"""

from __future__ import annotations

import argparse
import ast
import os
import sys
import time
from pathlib import Path

import numba
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_main_job import tree_label  # noqa: E402

from sketchsim.machine import machine_facts  # noqa: E402
from sketchsim.results import write_json_atomic  # noqa: E402
from sketchsim.sketch import HardFamily  # noqa: E402
from sketchsim.sketch import loop as engine_loop  # noqa: E402
from sketchsim.sketch.engine import Engine, loop_functions  # noqa: E402
from sketchsim.sketch.plugins import resolve_spec  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def loop_code(path: Path):
    """The code object of the function ``loop`` defined in the file ``path``."""
    try:
        tree = ast.parse(path.read_text())
    except (OSError, SyntaxError, ValueError) as exc:
        raise ValueError(f"cannot read {path}: {exc}") from None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "loop":
            module = ast.Module(body=[node], type_ignores=[])
            namespace: dict = {}
            exec(compile(module, str(path), "exec"), namespace)
            return namespace["loop"].__code__
    raise ValueError(f"{path}: no function named loop")


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--loop-from", nargs="*", default=[], type=Path)
    ap.add_argument("--protocols", nargs="*", default=["raw", "kernel", "multihead:heads=4"])
    ap.add_argument("--compiles", type=int, default=2)
    ap.add_argument("--inputs", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    load = os.getloadavg()[0]
    sources = [(tree_label(str(ROOT)), engine_loop.loop.__code__)]
    try:
        sources += [(tree_label(str(p.resolve().parents[2])), loop_code(p)) for p in args.loop_from]
    except ValueError as exc:
        ap.error(str(exc))
    fam = HardFamily(64, 7, seed=0)
    ctx = fam.context()
    T = fam.sample_answers(args.inputs)
    tokens, fixed = fam.variable_tokens(T), fam.fixed_tokens()
    print(f"load average {load:.1f}; F(64, 7), {args.inputs:,} inputs, "
          f"{numba.config.NUMBA_NUM_THREADS} threads, min of {args.repeat}")  # fmt: skip
    engines = []  # (protocol, source index, engine)
    for spec in args.protocols:
        proto, params, _ = resolve_spec(spec)
        first = None
        for k, (label, code) in enumerate(sources):
            for _ in range(args.compiles):
                e = Engine(proto.plan(ctx, params), ctx, proto.name)
                e._loop = engine_loop.compiled(loop_functions(e.plan), inline=True, code=code)
                res = e.run(tokens, fixed=fixed)
                if first is None:
                    first = res
                for a, b in ((first.answers, res.answers), (first.fingerprints, res.fingerprints)):
                    if not np.array_equal(a, b):
                        raise SystemExit(f"{spec}: the loop of {label} gave other results")
                engines.append((spec, k, e))
    best = [float("inf")] * len(engines)
    for _ in range(args.repeat):
        for i, (_, _, e) in enumerate(engines):
            t = time.perf_counter()
            e.run(tokens, fixed=fixed)
            best[i] = min(best[i], time.perf_counter() - t)
    rows = []
    for spec in args.protocols:
        for k, (label, _) in enumerate(sources):
            us = [
                1e6 * t / args.inputs
                for (s, src, _), t in zip(engines, best, strict=True)
                if (s, src) == (spec, k)
            ]
            rows.append({"protocol": spec, "code": label, "us_per_input": us})
            text = ", ".join(f"{u:.3f}" for u in us)
            print(f"  {spec:<22} {label:<10} us/input per compilation: {text}"
                  f"   (spread {100 * (max(us) / min(us) - 1):.1f}%)")  # fmt: skip
    if args.json:
        out = {
            "inputs": args.inputs,
            "repeat": args.repeat,
            "compiles": args.compiles,
            "threads": numba.config.NUMBA_NUM_THREADS,
            "load_average_start": load,
            "load_average_end": os.getloadavg()[0],
            "rows": rows,
            "machine": machine_facts(),
            "time_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        }
        write_json_atomic(args.json, out)
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
