"""Dask ``local:2`` against the single-process path, measured in the same run.

Run: python benchmarks/bench_cluster.py [--m 9] [--n 3]

verify --m 9 --n 3 enumerates 2^27 inputs (above the single-process limit of
2^26, so the one-process side calls the same jitted enumeration,
``sketchsim.verify.check_range``, over the whole index space).  That kernel
runs numba threads over both cores, so it is timed twice: with its default
threads and pinned to one thread (what one Dask worker gets).  For small N the
single-process ``verify`` uses count patterns instead and is far faster than
any enumeration; the cluster is for sizes where that path does not apply.  The cluster is
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
    from sketchsim.verify import check_range

    m, n = args.m, args.n
    total = 1 << (m * n)
    check_range("softmax", 2, n, 2.0, False, 0, 1 << (2 * n))  # compile / load cache
    threads = numba.get_num_threads()

    def one_process():
        return check_range("softmax", m, n, 2.0, False, 0, total)

    t_multi, ref = _timed(one_process, args.repeats)
    numba.set_num_threads(1)
    t_one, _ = _timed(one_process, args.repeats)
    numba.set_num_threads(threads)

    t0 = time.perf_counter()
    with connect(parse_cluster("local:2")) as client:
        startup = time.perf_counter() - t0
        verify_on_cluster(client, 2, n, "softmax", 2.0, False, None)  # warm the workers
        t_cluster, got = _timed(
            lambda: verify_on_cluster(client, m, n, "softmax", 2.0, False, None), args.repeats
        )
    err, exact, _ = ref
    assert (float(err), int(exact)) == (got.max_abs_error, round(got.exact_fraction * total)), (
        "cluster and single-process results differ"
    )
    inputs = total
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
