"""Certificate DP on a family of about 10^5 inputs: jitted vs pure-Python, same run.

Run: python benchmarks/bench_certify.py
The family is the chain witness of the greedy (m=14, d=4, w=7) code (161,008
inputs); both DPs run on the same graph and must agree exactly.
"""

from __future__ import annotations

import time

import numpy as np

from sketchsim.certify import build_witness, certify
from sketchsim.certify.certificate import build_graph, chain_dp
from sketchsim.codes import greedy_code


def main():
    t = time.perf_counter()
    fam = build_witness(greedy_code(14, 4, 7), "greedy", chains=True, seed=0)
    print(f"family: {len(fam.tokens):,} inputs, m = {fam.m} ({time.perf_counter() - t:.1f} s)")
    t = time.perf_counter()
    graph = build_graph(fam)
    print(
        f"graph: {len(graph.node_query):,} nodes, {len(graph.edge_src):,} edges "
        f"({time.perf_counter() - t:.2f} s)"
    )
    chain_dp(graph, 0.5)  # compile / load cache
    t = time.perf_counter()
    fast = chain_dp(graph, 0.5)
    t_jit = time.perf_counter() - t
    t = time.perf_counter()
    slow = chain_dp(graph, 0.5, python=True)
    t_py = time.perf_counter() - t
    assert np.array_equal(fast, slow)
    print(
        f"chain DP: jitted {t_jit * 1e3:.2f} ms, python {t_py * 1e3:.0f} ms, "
        f"ratio {t_py / t_jit:,.0f}x"
    )
    t = time.perf_counter()
    cert = certify(fam)
    print(
        f"full certify (5 eps levels, pair selection): {time.perf_counter() - t:.2f} s, "
        f"r >= {cert.certified_rank['0.5']} from {cert.pairs['0.5']} pairs"
    )


if __name__ == "__main__":
    main()
