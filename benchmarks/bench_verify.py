"""Exhaustive ``verify`` against the NumPy a user would write, in process and as a CLI run.

Run: python benchmarks/bench_verify.py [--quick] [--repeats R]

The peer (``PEER_SOURCE``) enumerates every input the way a NumPy user would: a
lookup table of all token-pair inner products ``ip[u, v] = |u & v|`` (256 x 256
at m = 8) with the softmax weight and weighted vote of each pair precomputed,
the last two tokens vectorised as a (2^m, 2^m) grid and the leading ones in a
Python loop.  Both sides must report the same max error and exact fraction.
``verify`` counts column-type patterns (see :mod:`sketchsim.heads.exhaustive`); the
"enumeration kernel" rows time the jitted enumeration of every input (used for
large N and cluster shards) on the same problem.  The CLI rows time
``sketchsim verify`` (numba cache warm) against the peer run as a script, each
in a fresh process, the two run in turns (best of ``2 x repeats`` each).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ratios import report  # noqa: E402

from sketchsim.heads.exhaustive import check_range, verify  # noqa: E402

PEER_SOURCE = '''
import itertools
import sys

import numpy as np


def numpy_verify(m, n, beta):
    """Softmax head exp(-beta <x_i, x_j>) on all 2^(m n) inputs: (max error, exact fraction)."""
    side = 1 << m
    u = np.arange(side)
    ip = np.zeros((side, side), dtype=np.int64)
    for k in range(m):
        bit = (u >> k) & 1
        ip += bit[:, None] & bit[None, :]
    w = np.exp(-beta * ip.astype(np.float64))  # weight of every token pair
    wg = w * ip  # weighted vote of every token pair
    tables = (ip, w, wg)
    grid = (slice(None), None), (None, slice(None))  # axes of the last two tokens

    def pair(lead, i, j):
        """(overlap, weight, vote) of query i with key j, broadcastable to the grid."""
        if i < n - 2 and j < n - 2:
            return [t[lead[i], lead[j]] for t in tables]
        if i < n - 2 or j < n - 2:  # one lead token, one grid token
            a, g = (lead[i], j) if i < n - 2 else (lead[j], i)
            return [t[a][grid[g - (n - 2)]] for t in tables]
        if i == j:  # a grid token with itself
            return [np.diag(t)[grid[i - (n - 2)]] for t in tables]
        return list(tables)  # the two grid tokens (the tables are symmetric)

    max_err, exact = 0.0, 0
    for lead in itertools.product(range(side), repeat=n - 2):
        ok = np.ones((side, side), dtype=bool)
        for i in range(n):
            t, den, num = pair(lead, i, 0)
            for j in range(1, n):
                g, wj, wgj = pair(lead, i, j)
                t = np.minimum(t, g)
                num = num + wgj
                den = den + wj
            err = np.abs(num / den - t)
            max_err = max(max_err, float(np.max(err)))
            ok &= err < 0.5
        exact += int(ok.sum())
    return max_err, exact / side**n


if __name__ == "__main__":
    m, n, beta = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    print(*numpy_verify(m, n, beta))
'''
_peer: dict = {}
exec(compile(PEER_SOURCE, "numpy_peer", "exec"), _peer)
numpy_verify = _peer["numpy_verify"]


def best_of(fn, repeat):
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def run_process(args):
    return subprocess.run(args, capture_output=True, text=True, check=True).stdout


def in_turns(first, second, repeat):
    """Best wall times of two commands run alternately, so that both see the same moments
    of a shared machine (a process start-up moves by tens of milliseconds with the load)."""
    best = [float("inf"), float("inf")]
    for _ in range(repeat):
        for k, cmd in enumerate((first, second)):
            t = time.perf_counter()
            run_process(cmd)
            best[k] = min(best[k], time.perf_counter() - t)
    return best[0], best[1]


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="2^18-input enumerations")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    cases = [(6, 3), (3, 6)] if args.quick else [(8, 3), (6, 4)]
    beta = 2.0
    verify(2, 3, "softmax", beta)  # compile / load the cache outside the timings
    rows = []
    check_range("softmax", 2, 3, beta, False, 0, 64)  # the jitted enumeration, too
    for m, n in cases:
        total = 2 ** (m * n)
        t_ours, res = best_of(lambda m=m, n=n: verify(m, n, "softmax", beta), args.repeats)
        t_enum, (enum_err, enum_exact, _) = best_of(
            lambda m=m, n=n: check_range("softmax", m, n, beta, False, 0, 2 ** (m * n)),
            args.repeats,
        )
        t_peer, (err, frac) = best_of(lambda m=m, n=n: numpy_verify(m, n, beta), args.repeats)
        assert abs(err - res.max_abs_error) < 1e-12 and frac == res.exact_fraction
        assert enum_err == res.max_abs_error and enum_exact / total == frac
        rows.append((f"verify in-process m={m} N={n}", t_ours, t_peer))
        rows.append((f"enumeration kernel m={m} N={n}", t_enum, t_peer))
    with tempfile.TemporaryDirectory() as tmp:
        peer_file = os.path.join(tmp, "numpy_verify.py")
        with open(peer_file, "w") as fh:
            fh.write(PEER_SOURCE)
        for m, n in cases:
            cli = [sys.executable, "-m", "sketchsim", "verify", "--m", str(m), "--n", str(n)]
            cli += ["--construction", "softmax", "--beta", str(beta), "--quiet"]
            run_process(cli)  # the numba cache is warm from here on
            script = [sys.executable, peer_file, str(m), str(n), str(beta)]
            t_cli, t_script = in_turns(cli, script, 2 * args.repeats)
            rows.append((f"verify CLI (warm) m={m} N={n}", t_cli, t_script))
    print("verify (softmax, beta = 2): sketchsim vs a NumPy lookup-table enumeration")
    report("bench_verify", [(name, ours, "numpy LUT enumeration", p) for name, ours, p in rows])
    return rows


if __name__ == "__main__":
    main()
