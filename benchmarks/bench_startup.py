"""Start-up time of ``sketchsim --help`` against the floor of its own dependencies.

Run: python benchmarks/bench_startup.py [--repeats R]

Each command runs in a fresh process (min of R wall times).  The peer is a bare
interpreter importing what the CLI cannot avoid (click and the rich pieces it
renders with); the difference is sketchsim's own import cost.  Also reported:
which heavy modules ``import sketchsim.cli`` loads (none of numba, torch, scipy
should be there; NumPy is named if a command module imports it at top level).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ratios import best_of, report  # noqa: E402

FLOOR = "import click, rich.console, rich.table, rich.panel, rich.progress"


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args(argv)
    py = sys.executable

    def run(*cmd):
        subprocess.run([py, *cmd], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)

    heavy = subprocess.run(
        [
            py,
            "-c",
            "import sys, sketchsim.cli; print(*[m for m in "
            "('numpy', 'numba', 'scipy', 'torch', 'dask', 'matplotlib') if m in sys.modules])",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    print(f"heavy modules loaded by `import sketchsim.cli`: {', '.join(heavy) or 'none'}")
    t_help = best_of(lambda: run("-m", "sketchsim", "--help"), args.repeats)
    t_floor = best_of(lambda: run("-c", FLOOR), args.repeats)
    t_python = best_of(lambda: run("-c", "pass"), args.repeats)
    print(f"bare interpreter: {t_python * 1e3:.0f} ms")
    report("bench_startup", [("sketchsim --help", t_help, "python + click + rich", t_floor)])


if __name__ == "__main__":
    main()
