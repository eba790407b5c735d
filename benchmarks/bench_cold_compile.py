"""Where the main job's cold start goes: numba's compile time per function (issue #31).

Run: python benchmarks/bench_cold_compile.py [--top N] [--json PATH]

Runs ``sketchsim transcript --q 64 --s 7 --quiet`` once in a fresh process with
empty ``NUMBA_CACHE_DIR`` and ``SKETCHSIM_CACHE_DIR`` (a fresh install) and
no compiling helper (``SKETCHSIM_PREWARM=0``, so that every loop compiles here), listening
to numba's ``numba:compile`` events.  A function's time is *exclusive*: the
compilations it triggers (a called, not inlined, protocol function; NumPy
overloads) are counted under their own names, so the rows add up to the total
compile time.  The engine loops are named by their generated module
(``sketchsim_engine_<key>.loop``) and by the protocols that ran them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

CMD = ["transcript", "--q", "64", "--s", "7", "--quiet"]


def child(out: str) -> None:
    """In the fresh process: run the main job, record exclusive compile seconds."""
    from numba.core import event

    from sketchsim.sketch import engine

    seconds: dict[str, float] = {}
    stack: list[list] = []  # [name, start, seconds spent in nested compilations]

    class Timer(event.Listener):
        def on_start(self, ev):
            stack.append([_name(ev.data.get("dispatcher")), time.perf_counter(), 0.0])

        def on_end(self, ev):
            name, start, nested = stack.pop()
            spent = time.perf_counter() - start
            seconds[name] = seconds.get(name, 0.0) + spent - nested
            if stack:
                stack[-1][2] += spent

    from click.testing import CliRunner

    from sketchsim.cli import main

    event.register("numba:compile", Timer())
    t = time.perf_counter()
    res = CliRunner().invoke(main, CMD)
    wall = time.perf_counter() - t
    if res.exit_code != 0:
        raise SystemExit(f"the main job failed: {res.output[-500:]}")
    loops = {}
    for (emit, *_), loop in engine._LOOPS.items():
        loops[_name(loop)] = getattr(emit, "__module__", "?")
    with open(out, "w") as fh:
        json.dump({"wall_s": wall, "seconds": seconds, "loops": loops}, fh)


def _name(dispatcher) -> str:
    fn = getattr(dispatcher, "py_func", None)
    return f"{fn.__module__}.{fn.__qualname__}" if fn is not None else "?"


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--json", default=None)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return child(args.child)
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        # no helper process (sketchsim.sketch.prewarm): every compilation in this process
        env = {**os.environ, "NUMBA_CACHE_DIR": f"{tmp}/numba", "SKETCHSIM_CACHE_DIR": f"{tmp}/sk",
               "SKETCHSIM_PREWARM": "0"}  # fmt: skip
        out = f"{tmp}/out.json"
        t = time.perf_counter()
        subprocess.run([sys.executable, os.path.abspath(__file__), "--child", out], env=env,
                       cwd=tmp, check=True)  # fmt: skip
        process = time.perf_counter() - t
        with open(out) as fh:
            got = json.load(fh)
    rows = sorted(got["seconds"].items(), key=lambda kv: -kv[1])
    total = sum(got["seconds"].values())
    loops = sum(s for name, s in rows if name.startswith("sketchsim_engine_"))
    n_loops = len(got["loops"])
    print(f"cold process {process:.2f} s; the job in it {got['wall_s']:.2f} s, of which numba "
          f"compiling {total:.2f} s ({loops:.2f} s the {n_loops} engine loops)")  # fmt: skip
    for name, s in rows[: args.top]:
        who = f"  (loop of {got['loops'][name]})" if name in got["loops"] else ""
        print(f"  {s:6.2f} s  {name}{who}")
    if args.json:
        from sketchsim.machine import machine_facts
        from sketchsim.results import write_json_atomic

        write_json_atomic(
            args.json,
            {"command": "sketchsim " + " ".join(CMD), "process_s": process,
             "job_s": got["wall_s"], "compile_s": total, "engine_loops_s": loops,
             "engine_loops": got["loops"],
             "functions": [{"name": n, "seconds": s} for n, s in rows],
             "load_average_start": load, "load_average_end": os.getloadavg()[0],
             "machine": machine_facts(),
             "time_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime())},
        )  # fmt: skip
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
