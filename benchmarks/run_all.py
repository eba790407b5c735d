"""Run every ``benchmarks/bench_*.py`` and print one table of sketchsim-to-peer ratios.

Run: python benchmarks/run_all.py [--quick] [--only NAME ...] [--timeout S]

Each script runs in its own process (so thread settings and memory do not
leak between them), with ``--quick`` passed on to scripts that accept it.
Scripts report their rows through ``benchmarks/ratios.py``; a script that
reports none is listed with its exit status and its own output above.
Ratios above 1 mean sketchsim is faster.  Timings from the same script run
share the machine's state; the machine and its load are printed first.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def machine() -> str:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            cpu = next(line.split(":", 1)[1].strip() for line in fh if "model name" in line)
    except (OSError, StopIteration):
        pass
    python = platform.python_version()
    return f"{cpu}, {os.cpu_count()} cores, load average {load:.2f}, Python {python}"


def _ms(seconds: float) -> str:
    """Milliseconds, four significant digits, right-aligned in 12 columns."""
    return f"{seconds * 1e3:>9.4g} ms"


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="pass --quick to scripts accepting it")
    ap.add_argument("--only", nargs="*", help="script names (bench_minip or minip)")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per script")
    args = ap.parse_args(argv)
    scripts = sorted(glob.glob(os.path.join(HERE, "bench_*.py")))
    if args.only:
        wanted = {w if w.startswith("bench_") else f"bench_{w}" for w in args.only}
        scripts = [s for s in scripts if os.path.basename(s)[:-3] in wanted]
    print(f"machine: {machine()}")
    rows, status = [], []
    with tempfile.TemporaryDirectory() as tmp:
        rows_file = os.path.join(tmp, "rows.jsonl")
        env = dict(os.environ, SKETCHSIM_BENCH_ROWS=rows_file)
        for script in scripts:
            name = os.path.basename(script)[:-3]
            cmd = [sys.executable, script]
            with open(script) as fh:
                if args.quick and '"--quick"' in fh.read():
                    cmd.append("--quick")
            print(f"\n=== {name} ({' '.join(cmd[1:])})", flush=True)
            start = time.perf_counter()
            try:
                rc = subprocess.run(cmd, env=env, timeout=args.timeout).returncode
            except subprocess.TimeoutExpired:
                rc = "timeout"
            status.append((name, rc, time.perf_counter() - start))
        if os.path.exists(rows_file):
            with open(rows_file) as fh:
                rows = [json.loads(line) for line in fh if line.strip()]
    print(
        f"\n{'script':<20}{'workload':<42}{'sketchsim':>12}  {'peer':<30}{'peer':>12}{'ratio':>9}"
    )
    for r in rows:
        print(
            f"{r['script']:<20}{r['workload']:<42}{_ms(r['sketchsim_s'])}  {r['peer']:<30}"
            f"{_ms(r['peer_s'])}{r['peer_s'] / r['sketchsim_s']:>8.2f}x"
        )
    reported = {r["script"] for r in rows}
    for name, rc, secs in status:
        note = "" if name in reported else "  (no ratio rows: see its output above)"
        print(f"{name:<20}exit {rc}, {secs:.1f} s{note}")
    return 0 if all(rc == 0 for _, rc, _ in status) else 1


if __name__ == "__main__":
    sys.exit(main())
