"""Certificate speed: the Golay-octads family (1.7M inputs) and the chain DP, same run.

Run: python benchmarks/bench_certify.py [--octads N] [--repeats K] [--quick]

1. ``certify`` on the witness family of the first ``--octads`` Golay octads
   (default 200: 119,600 inputs; ``--octads 759``: all of them, 1,726,725 inputs),
   with today's ``build_graph`` (packed integer keys: ids from a lookup table,
   overlaps by popcount) against the reference ``tests/naive.build_graph`` (plain
   Python from the definition; it replaced the NumPy first version that
   docs/benchmarks.md's 759-octad numbers were measured against), in this process.
   Peak memory of each path is measured with ``tracemalloc`` (NumPy reports its
   buffers there); both certificates must be identical.
2. The jitted chain DP against its pure-Python loop on a 161,008-input chain family.

The default sizes finish in about a minute on the project's 2-core machine;
``--octads 759`` is the size docs/benchmarks.md quotes (over 5 minutes there,
almost all of it the plain-Python reference).  ``--quick`` is ``--octads 100 --repeats 1``.
"""

from __future__ import annotations

import argparse
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import naive  # noqa: E402

from sketchsim.certify import build_witness, certify  # noqa: E402
from sketchsim.certify import certificate as cert_mod  # noqa: E402
from sketchsim.certify.certificate import Graph, build_graph, chain_dp  # noqa: E402
from sketchsim.certify.codes import golay_octads, greedy_code  # noqa: E402


def _naive_graph(family, positional=True):
    return Graph(*naive.build_graph(family, positional))


def timed(fn, repeats=3):
    """(best seconds, peak traced MiB, result)."""
    best, peak, out = float("inf"), 0.0, None
    for _ in range(repeats):
        tracemalloc.start()
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
        peak = max(peak, tracemalloc.get_traced_memory()[1] / 2**20)
        tracemalloc.stop()
    return best, peak, out


def golay(octads: int, repeats: int) -> None:
    code = golay_octads()[:octads]
    t = time.perf_counter()
    fam = build_witness(code, "golay-octads")
    print(f"golay family: {len(fam.tokens):,} inputs ({time.perf_counter() - t:.1f} s to build)")
    certify(fam)  # warm the jitted DP
    t_new, mem_new, new = timed(lambda: certify(fam), repeats)
    real = cert_mod.build_graph
    cert_mod.build_graph = _naive_graph
    try:
        t_old, mem_old, old = timed(lambda: certify(fam), repeats)
    finally:
        cert_mod.build_graph = real
    assert new.to_dict() == old.to_dict(), "certificates differ"
    r = new.certified_rank
    print(f"certify, packed keys : {t_new:6.2f} s, peak {mem_new:7.0f} MiB  r >= {r}")
    print(f"certify, reference   : {t_old:6.2f} s, peak {mem_old:7.0f} MiB")
    print(f"ratio: {t_old / t_new:.2f}x faster, {mem_old / mem_new:.2f}x less memory")
    g_new = timed(lambda: build_graph(fam), repeats)[0]
    g_old = timed(lambda: _naive_graph(fam), repeats)[0]
    print(f"build_graph alone: {g_new:.2f} s vs {g_old:.2f} s ({g_old / g_new:.2f}x)")


def chain_dp_bench() -> None:
    fam = build_witness(greedy_code(14, 4, 7), "greedy", chains=True, seed=0)
    graph = build_graph(fam)
    print(f"chain family: {len(fam.tokens):,} inputs, {len(graph.edge_src):,} edges")
    chain_dp(graph, 0.5)
    t_jit, _, fast = timed(lambda: chain_dp(graph, 0.5), 5)
    t_py, _, slow = timed(lambda: chain_dp(graph, 0.5, python=True), 1)
    assert np.array_equal(fast, slow)
    print(
        f"chain DP: jitted {t_jit * 1e3:.2f} ms, python {t_py * 1e3:.0f} ms, "
        f"ratio {t_py / t_jit:,.0f}x"
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description="certificate speed, same run")
    parser.add_argument("--octads", type=int, default=200, help="Golay octads (1..759)")
    parser.add_argument("--repeats", type=int, default=1, help="timed repeats (best kept)")
    parser.add_argument("--quick", action="store_true", help="--octads 100 --repeats 1")
    args = parser.parse_args(argv)
    if not 1 <= args.octads <= 759 or args.repeats < 1:
        parser.error("--octads must be in 1..759 and --repeats at least 1")
    if args.quick:
        args.octads, args.repeats = 100, 1
    golay(args.octads, args.repeats)
    chain_dp_bench()


if __name__ == "__main__":
    main()
