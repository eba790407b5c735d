"""Dask ``local:2`` against the single-process path, measured in the same run.

Run: python benchmarks/bench_cluster.py [--m 2] [--n 14] [--only verify|transcript]

verify --m 2 --n 14 enumerates 2^28 inputs (above the single-process limit of
2^26, so the one-process side calls the same jitted enumeration,
``sketchsim.heads.exhaustive.check_range``, over the whole index space).  That kernel
runs numba threads over both cores, so it is timed twice: with its default
threads and pinned to one thread (what one Dask worker gets).  Sizes with few
column-type count vectors (small N, e.g. m = 9, N = 3) never reach the
cluster: ``verify`` checks them through the count vectors in one process.  The
cluster is timed without its start-up (reported separately), warm (the kernels
are compiled and cached before timing).  Results must be identical.

transcript --exhaustive on F(8, 7) (2^24 inputs; ``--q/--s`` change it): the
single-process ``measure`` (default numba threads, and in a child process with
NUMBA_NUM_THREADS=1) against ``measure_on_cluster`` on ``local:2`` (warm:
every worker has built the protocol's engine), for each ``--protocol``.  The
reports must be identical (seconds aside).  The per-worker start-up (resolve
the protocol, build and compile its engine) is measured by the first task on
each worker of a fresh cluster.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
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
    ap.add_argument("--m", type=int, default=2)
    ap.add_argument("--n", type=int, default=14)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--only", choices=("verify", "transcript"))
    ap.add_argument("--q", type=int, default=8)
    ap.add_argument("--s", type=int, default=7)
    ap.add_argument("--protocol", action="append")
    ap.add_argument("--one-thread-child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one_thread_child:
        print(json.dumps(_transcript_one(args.q, args.s, args.one_thread_child)))
        return
    if args.only != "transcript":
        bench_verify(args)
    if args.only != "verify":
        bench_transcript(args)


def bench_verify(args):
    from sketchsim.cluster.client import connect, parse_cluster
    from sketchsim.cluster.sharded_verify import verify_on_cluster
    from sketchsim.heads.exhaustive import check_range

    m, n = args.m, args.n
    total = 1 << (m * n)
    check_range("softmax", 1, n, 2.0, False, 0, 1 << n)  # compile / load cache
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
        verify_on_cluster(client, 1, n, "softmax", 2.0, False, None)  # warm the workers
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


def _transcript_one(q, s, spec):
    """The single-process transcript of every input of F(q, s): (seconds, report dict)."""
    from sketchsim.sketch.family import HardFamily
    from sketchsim.sketch.measure import measure
    from sketchsim.sketch.plugins import resolve

    r = resolve(spec)
    small = HardFamily(3, s)
    measure(small, small.all_answers(), r.protocol, r.params, r.source)  # compile / load
    fam = HardFamily(q, s)
    T = fam.all_answers()
    t = time.perf_counter()
    rep = measure(fam, T, r.protocol, r.params, r.source).to_dict()
    secs = time.perf_counter() - t
    rep.pop("seconds")
    return {"seconds": secs, "report": rep}


def bench_transcript(args):
    from sketchsim.cluster.client import connect, parse_cluster
    from sketchsim.cluster.sharded_measure import measure_on_cluster
    from sketchsim.sketch.family import HardFamily
    from sketchsim.sketch.plugins import resolve

    q, s = args.q, args.s
    fam = HardFamily(q, s)
    inputs = fam.size
    specs = args.protocol or ["block-counts", "clipped-counts"]
    threads = numba.config.NUMBA_NUM_THREADS
    print(f"\ntranscript --exhaustive F(q={q}, s={s}): {inputs:,} inputs; load {_load()}")
    rows = []
    t0 = time.perf_counter()
    with connect(parse_cluster("local:2")) as client:
        startup = time.perf_counter() - t0
        small = HardFamily(3, s)
        for spec in specs:
            r = resolve(spec)
            _, warm = measure_on_cluster(
                client, small, "hard", spec, r, "exhaustive", small.size, workers=2
            )
            multi = _transcript_one(q, s, spec)
            child = subprocess.run(
                [sys.executable, __file__, "--q", str(q), "--s", str(s)]
                + ["--one-thread-child", spec],
                env={**os.environ, "NUMBA_NUM_THREADS": "1"},
                capture_output=True,
                text=True,
                check=True,
            )
            one = json.loads(child.stdout.strip().splitlines()[-1])
            t = time.perf_counter()
            rep, stats = measure_on_cluster(
                client, fam, "hard", spec, r, "exhaustive", inputs, workers=2
            )
            t_cluster = time.perf_counter() - t
            rep = rep.to_dict()
            rep.pop("seconds")
            same = json.dumps(rep, sort_keys=True) == json.dumps(multi["report"], sort_keys=True)
            assert same and one["report"] == multi["report"], "reports differ"
            rows.append((spec, multi["seconds"], one["seconds"], t_cluster, stats, warm))
    print(f"{'protocol':<16}{'path':<34}{'seconds':>9}{'inputs/s':>12}{'local:2 speed-up':>18}")
    for spec, t_multi, t_one, t_cluster, stats, warm in rows:
        for name, secs in (
            (f"one process, {threads} numba threads", t_multi),
            ("one process, 1 numba thread", t_one),
            ("Dask local:2 (warm)", t_cluster),
        ):
            print(
                f"{spec:<16}{name:<34}{secs:>9.2f}{inputs / secs:>12.3g}{secs / t_cluster:>17.2f}x"
            )
        print(
            f"{'':<16}reports identical; {stats['map_tasks']} map tasks, {stats['partitions']} "
            f"ranges (P2P), {stats['shuffle_bytes'] / 2**20:.0f} MiB shuffled; map tasks "
            f"{stats['map_task_seconds']:.1f} s in all; scaling efficiency vs 1 thread: "
            f"{t_one / t_cluster / 2:.0%} of ideal on 2 workers"
        )
        print(
            f"{'':<16}phases: maps done after {stats['maps_done_after_seconds']:.1f} s, reduces "
            f"after {stats['reduces_done_after_seconds']:.1f} s (reduce tasks "
            f"{stats['reduce_task_seconds']:.1f} s in all), client merge "
            f"{stats['client_merge_seconds']:.2f} s"
        )
        startup_each = ", ".join(f"{v:.2f}" for v in warm["worker_startup_seconds"].values())
        print(f"{'':<16}per-worker start-up (resolve, build, compile): {startup_each} s")
    print(f"cluster start-up (2 worker processes): {startup:.2f} s; load after: {_load()}")


def _load() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


if __name__ == "__main__":
    main()
