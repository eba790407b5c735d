"""Start-up time of ``sketchsim --help`` against the floor of its own dependencies.

Run: python benchmarks/bench_startup.py [--repeats R]

Also the smallest main job, ``sketchsim transcript --q 4 --s 1 --quiet`` (warm
caches), against a bare interpreter importing NumPy, numba, click and rich and
running one cached jitted function (numba's own start-up, which the job cannot
avoid), and the modules it loads that it does not need
(``tests/sketch/test_startup_imports.py`` keeps that list empty).

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
#: The main job's floor: its libraries and numba's target loaded by one cached function.
JOB_FLOOR = (
    FLOOR + "; import numpy as np; from sketchsim.sketch.fingerprint import answer_hashes; "
    "from sketchsim.sketch.grouping import find_collision_candidates as f; "
    "f(np.zeros(2, dtype=np.int64), np.zeros((2, 1), dtype=np.int64))"
)
JOB = ["-m", "sketchsim", "transcript", "--q", "4", "--s", "1", "--quiet"]
NOT_NEEDED = (
    "sketchsim.sketch.trained", "numba.np.ufunc.omppool", "numba.np.ufunc.workqueue",
    "numba.np.ufunc.tbbpool", "multiprocessing", "torch", "matplotlib", "dask", "scipy.stats",
)  # fmt: skip


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
    rows = [("sketchsim --help", t_help, "python + click + rich", t_floor)]
    probe = (
        "import runpy, sys; sys.argv = ['sketchsim', *sys.argv[1:]]\n"
        "try:\n    runpy.run_module('sketchsim', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        f"print('LOADED:', *[m for m in {NOT_NEEDED!r} if m in sys.modules])"
    )
    out = subprocess.run([py, "-c", probe, *JOB[2:]], capture_output=True, text=True, check=True)
    loaded = [x for x in out.stdout.splitlines() if x.startswith("LOADED:")][0].split()[1:]
    print(f"modules the main job loads without needing them: {', '.join(loaded) or 'none'}")
    run(*JOB)  # warm the caches
    t_job = best_of(lambda: run(*JOB), args.repeats)
    t_job_floor = best_of(lambda: run("-c", JOB_FLOOR), args.repeats)
    rows.append(
        ("transcript --q 4 --s 1 (warm)", t_job, "python + numpy + numba + 1 jit", t_job_floor)
    )
    report("bench_startup", rows)


if __name__ == "__main__":
    main()
