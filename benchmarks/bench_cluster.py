"""Dask ``local:2`` against the single-process path, measured in the same run.

Run: python benchmarks/bench_cluster.py [--m 9] [--n 3]

verify --m 9 --n 3 enumerates 2^27 inputs.  The single-process path already
runs numba threads over both cores, so it is timed twice: with its default
threads and pinned to one thread (what one Dask worker gets).  The cluster is
timed without its start-up (reported separately), warm (the kernels are
compiled and cached before timing).  Results must be identical.
"""

from __future__ import annotations

import argparse
import time

import numba


def _timed(fn, repeats=3):
    best, out = float("inf"), None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--m", type=int, default=9)
    ap.add_argument("--n", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()

    from sketchsim.cluster import connect, parse_cluster
    from sketchsim.cluster_tasks import verify_on_cluster
    from sketchsim.verify import verify

    m, n = args.m, args.n
    verify(2, n, "softmax", 2.0, False)  # compile / load cache
    threads = numba.get_num_threads()
    t_multi, ref = _timed(lambda: verify(m, n, "softmax", 2.0, False), args.repeats)
    numba.set_num_threads(1)
    t_one, _ = _timed(lambda: verify(m, n, "softmax", 2.0, False), args.repeats)
    numba.set_num_threads(threads)

    t0 = time.perf_counter()
    with connect(parse_cluster("local:2")) as client:
        startup = time.perf_counter() - t0
        verify_on_cluster(client, 2, n, "softmax", 2.0, False, None)  # warm the workers
        t_cluster, got = _timed(
            lambda: verify_on_cluster(client, m, n, "softmax", 2.0, False, None), args.repeats
        )
    a, b = ref.to_dict(), got.to_dict()
    a.pop("seconds"), b.pop("seconds")
    assert a == b, "cluster and single-process results differ"
    inputs = 2 ** (m * n)
    print(f"verify --m {m} --n {n}: 2^{m * n} = {inputs:,} inputs, results identical")
    print(f"{'path':<34}{'seconds':>10}{'inputs/s':>14}{'local:2 speed-up':>18}")
    rows = [
        (f"single process, {threads} numba threads", t_multi),
        ("single process, 1 numba thread", t_one),
        ("Dask local:2 (warm)", t_cluster),
    ]
    for name, secs in rows:
        print(f"{name:<34}{secs:>10.3f}{inputs / secs:>14.3g}{secs / t_cluster:>17.2f}x")
    print(f"cluster start-up (2 worker processes): {startup:.2f} s")
    print(f"scaling efficiency vs 1 thread: {t_one / t_cluster / 2:.0%} of ideal on 2 workers")


if __name__ == "__main__":
    main()
