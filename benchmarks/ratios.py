"""Shared by the benchmark scripts: time a callable, report peer ratios for ``run_all.py``.

A script calls :func:`report` with rows ``(workload, sketchsim seconds, peer name,
peer seconds)``; they are printed, and when ``SKETCHSIM_BENCH_ROWS`` names a file
(``run_all.py`` sets it) appended to it as JSON lines.
"""

from __future__ import annotations

import json
import os
import time

__all__ = ["best_of", "report", "size_args"]


def size_args(doc: str):
    """``--inputs`` (4,096), ``--repeat`` (3) and ``--quick`` (1,024 inputs, one repeat),
    parsed for a script whose module docstring is ``doc``."""
    import argparse

    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--inputs", type=int, default=4096)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="1,024 inputs, one repeat")
    args = ap.parse_args()
    if args.quick:
        args.inputs, args.repeat = 1024, 1
    return args


def best_of(fn, repeat: int = 5) -> float:
    """Minimum wall time of ``repeat`` calls (the least disturbed by other processes)."""
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def report(script: str, rows) -> None:
    """Print ``rows`` of (workload, sketchsim_s, peer, peer_s) and hand them to run_all."""
    for workload, ours, peer, theirs in rows:
        print(
            f"  {workload:<40} sketchsim {ours * 1e3:9.2f} ms  {peer:<28} {theirs * 1e3:9.2f} ms"
            f"  {theirs / ours:6.2f}x"
        )
    path = os.environ.get("SKETCHSIM_BENCH_ROWS")
    if path:
        with open(path, "a") as fh:
            for workload, ours, peer, theirs in rows:
                row = {"script": script, "workload": workload, "sketchsim_s": ours}
                row.update({"peer": peer, "peer_s": theirs})
                fh.write(json.dumps(row) + "\n")
