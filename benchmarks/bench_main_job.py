"""The main job, warm and cold, against the NumPy peer, for one or more source trees, in turns.

Run: python benchmarks/bench_main_job.py [--tree PATH ...] [--rounds R] [--cold N] [--json PATH]

``sketchsim transcript --q 64 --s 7 --quiet`` as a fresh process (the way a user
runs it), for each ``--tree`` (a checkout of sketchsim put first on
``PYTHONPATH``; none: the installed package), and ``bench_engine.numpy_block_counts``
on 1,000,000 F(64, 7) inputs (the issue's peer), alternated within each round so
that every row sees the same load:

- **warm**: each tree's own engine and numba caches, filled before the first round;
- **cold**: ``--cold`` runs per tree with empty ``NUMBA_CACHE_DIR`` and
  ``SKETCHSIM_CACHE_DIR`` (a fresh install compiles everything; sketchsim's
  ``__pycache__`` numba caches of the tree are not used either).

Reported: the min over rounds of each, the ratios warm / peer (issue #31: at most
3x) and cold / warm (at most 2x), and the load average.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_engine import numpy_block_counts  # noqa: E402

from sketchsim.sketch import HardFamily  # noqa: E402

CMD = ["-m", "sketchsim", "transcript", "--q", "64", "--s", "7", "--quiet"]


def run_job(tree: str | None, env_extra: dict) -> float:
    env = {**os.environ, **env_extra}
    if tree:
        env["PYTHONPATH"] = os.pathsep.join([tree, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    t = time.perf_counter()
    # run from the tree (``python -m`` puts the working directory first on sys.path)
    subprocess.run(
        [sys.executable, *CMD], env=env, cwd=tree or tempfile.gettempdir(), check=True,
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    return time.perf_counter() - t


def _git(where: str, *args: str) -> str:
    out = subprocess.run(["git", "-C", where, *args], capture_output=True, text=True, check=True)
    return out.stdout.strip()


def tree_label(tree: str | None) -> str:
    """The tree's git commit (``+`` when it has uncommitted changes), not its path."""
    where = tree or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        head = _git(where, "rev-parse", "--short", "HEAD")
        dirty = _git(where, "status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.CalledProcessError):
        return "installed" if tree is None else "a tree outside git"
    return head + ("+" if dirty else "") + ("" if tree else " (installed)")


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--tree", action="append", default=None, help="source tree (repeatable)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cold", type=int, default=1)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    trees = args.tree or [None]
    fam = HardFamily(64, 7, seed=0)
    T = fam.sample_answers(1_000_000)
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        warm_env = {}
        for i, tree in enumerate(trees):
            d = os.path.join(tmp, f"warm{i}")
            warm_env[i] = {"SKETCHSIM_CACHE_DIR": d, "NUMBA_CACHE_DIR": d + "/numba"}
            run_job(tree, warm_env[i])  # fill the caches
        warm = {i: [] for i in range(len(trees))}
        cold = {i: [] for i in range(len(trees))}
        peer = []
        for r in range(args.rounds):
            for i, tree in enumerate(trees):
                warm[i].append(run_job(tree, warm_env[i]))
            t = time.perf_counter()
            numpy_block_counts(fam, T)
            peer.append(time.perf_counter() - t)
            for i, tree in enumerate(trees):
                if r < args.cold:
                    d = os.path.join(tmp, f"cold{i}-{r}")
                    cold[i].append(run_job(tree, {"SKETCHSIM_CACHE_DIR": d,
                                                  "NUMBA_CACHE_DIR": d + "/numba"}))  # fmt: skip
            print(f"  round {r + 1}: warm {[round(warm[i][-1], 2) for i in warm]} s, "
                  f"peer {peer[-1]:.2f} s", flush=True)  # fmt: skip
    rows = []
    for i, tree in enumerate(trees):
        w, c = min(warm[i]), (min(cold[i]) if cold[i] else None)
        row = {"tree": tree_label(tree), "warm_s": w, "warm_runs": warm[i], "cold_s": c,
               "cold_runs": cold[i], "peer_s": min(peer), "warm_over_peer": w / min(peer),
               "cold_over_warm": c / w if c else None}  # fmt: skip
        rows.append(row)
        cold_text = f", cold {c:.2f} s ({c / w:.2f}x warm)" if c else ""
        print(f"{row['tree']}: warm {w:.2f} s ({w / min(peer):.2f}x the peer's "
              f"{min(peer):.2f} s){cold_text}")  # fmt: skip
    if args.json:
        from sketchsim.machine import machine_facts
        from sketchsim.results import write_json_atomic

        write_json_atomic(
            args.json,
            {"command": "sketchsim " + " ".join(CMD[2:]), "peer": "numpy_block_counts, 1M inputs",
             "rounds": args.rounds, "load_average_start": load,
             "load_average_end": os.getloadavg()[0], "rows": rows, "machine": machine_facts(),
             "time_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime())},
        )  # fmt: skip
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
