"""The K search of ``sketchsim capacity`` against older trees, same files, same run (issue #45).

Run: python benchmarks/bench_capacity_search.py [FOLDER] [--baseline-src DIR ...] [--json PATH]
[--quick]

``FOLDER`` holds weights files (``sketchsim sweep --suite capacity --save-weights
FOLDER``: the default plan's 72); without it the script trains that plan into a
temporary folder first (``--quick``: ``reproduce --quick``'s capacity plan, 8 files).
Each tree (this one, then every ``--baseline-src``,
e.g. a ``git worktree`` of the issue's commit) measures every file in its own
process, one after the other: ``measure_weights`` (``sketchsim.runs.capacity``, or
``sketchsim.experiments.capacity`` in trees before it moved) with its defaults.  The
first file is measured once before the clock starts (numba compiles or loads its
cache), then all files are timed, wall and CPU, and within them the engine's answers
(the accuracy curve's 32 K on up to 4,096 inputs, and the checks on more inputs) and
the measurements (transcript and answers at one K on every input).  Printed per
tree: seconds and the
ratio ``tree / this tree``; the smallest ``K``, transcript bits and whether each
file decoded must be the same in every tree (a search that changed an answer is a
bug, not a speed-up), and the mismatches are listed.

A time is this machine's at that moment, not a claim; ``--json`` records the
machine and the trees' commits.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from bench_main_job import tree_label  # noqa: E402
from ratios import report  # noqa: E402

# run in the tree's own process: PYTHONPATH is the tree, so it imports that sketchsim
CHILD = r"""
import glob, json, sys, time
try:
    from sketchsim.runs.capacity import measure_weights
except ImportError:  # before the move (#46)
    from sketchsim.experiments.capacity import measure_weights
folder, out = sys.argv[1], sys.argv[2]
files = sorted(glob.glob(folder + "/*.npz"))
measure_weights(files[0])
# where the time goes: the engine's answers (the curve, and the checks beside it) and
# the measurement (transcript and answers on every input at one K)
phases = {"answers_s": 0.0, "measure_s": 0.0}
def timed(fn, key):
    def run(*a, **k):
        t = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            phases[key] += time.perf_counter() - t
    return run
capacity = sys.modules[measure_weights.__module__]
capacity._engine_answers = timed(capacity._engine_answers, "answers_s")
try:
    import sketchsim.sketch.measure as measuring
except ImportError:  # before the rename (#46)
    import sketchsim.sketch.transcript as measuring
measuring.measure = timed(measuring.measure, "measure_s")
wall, cpu = time.perf_counter(), time.process_time()
rows = []
for f in files:
    t = time.perf_counter()
    r = measure_weights(f)
    rows.append({"weights": r["weights"], "bits_per_coordinate": r["bits_per_coordinate"],
                 "transcript_bits": r["transcript_bits"], "decoded": bool(r["decoded"]),
                 "seconds": time.perf_counter() - t})
res = {"wall_s": time.perf_counter() - wall, "cpu_s": time.process_time() - cpu, **phases,
       "rows": rows}
json.dump(res, open(out, "w"))
"""


def run_tree(src: str, folder: str) -> dict:
    """Measure every file of ``folder`` with the sketchsim of tree ``src`` (its own process)."""
    label = tree_label(src)  # before the run: the commit that was timed
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out.json")
        env = dict(os.environ, PYTHONPATH=src)
        subprocess.run([sys.executable, "-c", CHILD, folder, out], env=env, check=True)
        with open(out) as fh:
            res = json.load(fh)
    res["tree"] = label
    return res


def train_plan(tmp: str, quick: bool) -> str:
    """The capacity suite's default plan (``quick``: reproduce --quick's) trained into
    ``tmp``/weights by this tree's CLI; returns that folder."""
    folder = os.path.join(tmp, "weights")
    small = ["--q", "4,8", "--layers", "1", "--seeds", "1"] if quick else []
    print(f"training the {'quick' if quick else 'default'} capacity plan ...", flush=True)
    subprocess.run([sys.executable, "-m", "sketchsim", "sweep", "--suite", "capacity", *small,
                    "--json", os.path.join(tmp, "sweep.json"), "--save-weights", folder],
                   env=dict(os.environ, PYTHONPATH=ROOT), check=True)  # fmt: skip
    return folder


def mismatches(ours: dict, theirs: dict) -> list[str]:
    """Files whose answer (smallest K, transcript bits, decoded) differs between two trees."""
    keys = ("bits_per_coordinate", "transcript_bits", "decoded")
    mine = {r["weights"]: r for r in ours["rows"]}
    out = []
    for r in theirs["rows"]:
        a = mine.get(r["weights"])
        if a is None or any(a[k] != r[k] for k in keys):
            out.append(r["weights"])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", nargs="?")
    ap.add_argument("--quick", action="store_true", help="without FOLDER: the quick plan")
    ap.add_argument("--baseline-src", action="append", default=[], metavar="DIR",
                    help="an older tree timed on the same files (repeatable)")  # fmt: skip
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args()
    if args.folder and not glob.glob(os.path.join(args.folder, "*.npz")):
        ap.exit(2, f"error: {args.folder} holds no weights files (*.npz)\n")
    bad = [src for src in args.baseline_src if not os.path.isdir(os.path.join(src, "sketchsim"))]
    if bad:
        ap.exit(2, f"error: --baseline-src {bad[0]} is not a sketchsim source tree\n")
    trees = [ROOT, *args.baseline_src]
    with tempfile.TemporaryDirectory() as tmp:
        folder = os.path.abspath(args.folder) if args.folder else train_plan(tmp, args.quick)
        results = []
        for src in trees:
            print(f"timing {src} ...", flush=True)
            results.append(run_tree(src, folder))
    ours = results[0]
    n = len(ours["rows"])
    rows = []
    for res in results[1:]:
        bad = mismatches(ours, res)
        print(f"  {res['tree']}: {len(bad)} of {n} files answer differently {bad[:5]}")
        res["mismatches"] = bad
        rows.append((f"K search, {n} files", ours["wall_s"], res["tree"], res["wall_s"]))
    for res in results:
        print(
            f"{res['tree']}: {res['wall_s']:.1f} s wall, {res['cpu_s']:.1f} s CPU; engine "
            f"answers {res['answers_s']:.1f} s, measurements {res['measure_s']:.1f} s"
        )
    report("bench_capacity_search", rows)
    if args.json:
        from sketchsim.machine import machine_facts
        from sketchsim.results import write_json_atomic

        write_json_atomic(args.json, {"what": __doc__.splitlines()[0], "folder": args.folder,
                                      "machine": machine_facts(), "trees": results})  # fmt: skip


if __name__ == "__main__":
    main()
