"""The main job's protocols against a roofline measured in the same run (issue #31).

Run: python benchmarks/bench_roofline.py [--quick] [--inputs N] [--split SPEC ...] [--json PATH]

**Limits**, measured here, in this process, minutes apart at most from the rows:

- memory bandwidth: a NumPy copy of a 128 MiB uint64 array (bytes read + written
  per second, min of repeats);
- popcount rate: ``np.bitwise_count`` over 32,768 uint64 words (256 KiB, cache
  resident), words per second.

Each is measured twice before the rows, and the higher value is the limit (measured
again after the rows, for the record).

**Per protocol** of the main job (``sketchsim transcript --q 64 --s 7``'s default
set, F(64, 7), sampled inputs), what one input touches:

- input bytes: the ``N = q + 1`` packed tokens the engine reads (``N x words x 8``;
  only the data token, 64 bytes, is new per input, the q query tokens are shared);
- transcript bytes: the transcript as the engine holds it (int64 entries x 8);
- streamed bytes: what cannot stay in cache from one input to the next: the new
  input bytes and the transcript bytes (the shared query tokens stay in L1);
- popcount words: the 64-bit words a protocol must at least count: every token's
  words once (``N x words``) and, for ``raw``, whose queries compare themselves
  with every token, ``q x N x words`` AND + popcount (dense Min-IP).

The roofline time per input is ``max(streamed bytes / bandwidth, words / popcount
rate)``, both limits on as many threads as the engine uses (numba's),
and the fraction is roofline time / measured time: ``measure()`` end to end (warm,
min of repeats) and the engine alone (``Engine.run`` on prebuilt tokens).

**Stage split** (``--split``, default ``kernel`` and ``block-counts``), one thread:
``measure()`` with timers wrapped around the calls it makes (input generation,
engine, entry tally, answer check, grouping, collision check, entropies and
report; results unchanged), and the engine's own stages by ablation: the same
compiled loop (``sketchsim.sketch.loop``) rebuilt with the protocol's ``emit``,
the fingerprint ``fold``, ``update`` and ``answer`` switched on one at a time
(no-ops before), each difference one stage; "channel + loop" is the loop with
all four off (resetting the sketch and state, channel writes, storing the
transcript; a plan's ``init``, where it has one, runs in every step).

**Main job ratio** (``--main-job``): ``sketchsim transcript --q 64 --s 7 --quiet``
(warm caches, a fresh process each time) against the NumPy peer of
``bench_engine.py`` (``numpy_block_counts``) on 1,000,000 F(64, 7) inputs, and
block-counts ``measure()`` in this process (warm: beyond start-up) on the same
inputs, run in turns, min of each; the issue's bars are the main job in at most
3x the peer's time and block-counts at least 4x faster than the peer.

Times on a shared machine move with its load: read the ratios and fractions of
one run, not absolute times.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numba
import numpy as np
from numba import njit

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_main_job import tree_label  # noqa: E402
from ratios import best_of, report  # noqa: E402

import sketchsim  # noqa: E402
from sketchsim.sketch import loop as engine_loop  # noqa: E402
from sketchsim.sketch.engine import Engine  # noqa: E402
from sketchsim.sketch.family import HARD, HardFamily  # noqa: E402
from sketchsim.sketch.fingerprint import fold  # noqa: E402
from sketchsim.sketch.plugins import resolve_spec  # noqa: E402

# ---- limits -----------------------------------------------------------------------------


def _threaded(fn, parts):
    """Run ``fn(part)`` for every part at once, one thread each (NumPy releases the GIL)."""
    if len(parts) == 1:
        fn(parts[0])
        return
    with ThreadPoolExecutor(len(parts)) as pool:
        list(pool.map(fn, parts))


def bandwidth(repeat: int, threads: int, mib: int = 128) -> float:
    """Bytes per second (read + written) of ``np.copyto`` on ``mib`` MiB, on ``threads``."""
    n = mib * 2**20 // 8 // threads
    parts = [(np.ones(n, dtype=np.uint64), np.zeros(n, dtype=np.uint64)) for _ in range(threads)]
    copy = lambda p: np.copyto(p[1], p[0])  # noqa: E731
    _threaded(copy, parts)  # pages mapped
    t = best_of(lambda: _threaded(copy, parts), max(3, repeat))
    return 2 * 8 * n * threads / t


def popcount_rate(repeat: int, threads: int, words: int = 1 << 15, inner: int = 64) -> float:
    """uint64 words per second through ``np.bitwise_count`` (cache-resident), on ``threads``."""
    rng = np.random.default_rng(0)
    parts = [
        (rng.integers(0, 2**63, size=words, dtype=np.uint64), np.empty(words, dtype=np.uint8))
        for _ in range(threads)
    ]

    def count(p):
        for _ in range(inner):
            np.bitwise_count(p[0], out=p[1])

    return threads * words * inner / best_of(lambda: _threaded(count, parts), max(3, repeat))


# ---- per protocol -------------------------------------------------------------------------


def engine_for(spec: str, fam: HardFamily) -> Engine:
    proto, params, _ = resolve_spec(spec)
    ctx = fam.context()
    return Engine(proto.plan(ctx, params), ctx, proto.name)


def touched(spec: str, fam: HardFamily, engine: Engine) -> dict:
    """Bytes and popcount words one input needs at least (see the module docstring)."""
    token_words = fam.n_tokens * fam.words
    words = token_words + (fam.q * token_words if spec == "raw" else 0)
    return {
        "input_bytes": 8 * token_words,
        "input_bytes_new": 8 * (fam.n_tokens - fam.n_fixed) * fam.words,
        "transcript_bytes": 8 * engine.total_len,
        "streamed_bytes": 8 * ((fam.n_tokens - fam.n_fixed) * fam.words + engine.total_len),
        "popcount_words": words,
    }


def protocol_rows(fam, T, specs, repeat, bw, pop) -> list[dict]:
    from sketchsim.sketch.measure import measure

    n = T.shape[0]
    tokens = fam.variable_tokens(T)
    fixed = fam.fixed_tokens()
    rows = []
    for spec in specs:
        proto, params, source = resolve_spec(spec)
        engine = engine_for(spec, fam)
        engine.run(tokens[:64], fixed=fixed)  # compile (or load) and validate
        measure(fam, T[:256], proto, params, source)
        t_measure = best_of(lambda: measure(fam, T, proto, params, source), repeat)  # noqa: B023
        t_engine = best_of(lambda: engine.run(tokens, fixed=fixed), repeat)  # noqa: B023
        need = touched(spec, fam, engine)
        t_mem = need["streamed_bytes"] / bw
        t_pop = need["popcount_words"] / pop
        roof = max(t_mem, t_pop)
        row = {
            "protocol": spec,
            **need,
            "roofline_us": roof * 1e6,
            "bound_by": "memory" if t_mem >= t_pop else "popcount",
            "measure_us": t_measure / n * 1e6,
            "engine_us": t_engine / n * 1e6,
            "fraction_measure": roof / (t_measure / n),
            "fraction_engine": roof / (t_engine / n),
        }
        rows.append(row)
        print(
            f"  {spec:<28} in {need['input_bytes']:>5} B  tr {need['transcript_bytes']:>6} B  "
            f"pop {need['popcount_words']:>6} w  roof {row['roofline_us']:7.3f} us "
            f"({row['bound_by']:<8})  measure {row['measure_us']:8.3f} us "
            f"{100 * row['fraction_measure']:6.2f}%  engine {row['engine_us']:8.3f} us "
            f"{100 * row['fraction_engine']:6.2f}%",
            flush=True,
        )
    return rows


# ---- stage split --------------------------------------------------------------------------


@njit(inline="always")
def _no_emit(layer, pos, bits, ctx, state, aux, out):
    return None


@njit(inline="always")
def _no_update(layer, pos, bits, ctx, state, sketch, aux):
    return None


@njit(inline="always")
def _no_answer(pos, bits, ctx, state, aux):
    return state[0]


@njit(inline="always")
def _no_fold(h1, h2, e, v):
    return h1, h2


def variant_loop(emit, update, answer, fold, init=engine_loop.no_init):
    """The engine's loop compiled with these functions (as the engine binds them)."""
    return engine_loop.compiled((emit, update, answer, init), inline=True, fold=fold)


def engine_stages(spec, fam, T, repeat) -> dict:
    """Seconds per input of each engine stage, by switching them on one at a time."""
    engine = engine_for(spec, fam)
    plan = engine.plan

    steps = [
        ("channel + loop", (_no_emit, _no_fold, _no_update, _no_answer)),
        ("emit", (plan.emit, _no_fold, _no_update, _no_answer)),
        ("fingerprint", (plan.emit, fold, _no_update, _no_answer)),
        ("update", (plan.emit, fold, plan.update, _no_answer)),
        ("answer", (plan.emit, fold, plan.update, plan.answer)),
    ]
    n = T.shape[0]
    batch = 1024
    tokens = fam.variable_tokens(T)
    fixed = fam.fixed_tokens()
    outputs = engine.new_outputs(batch, True)
    times = {}
    init = plan.init or engine_loop.no_init  # a plan's init runs in every step
    for name, (e, f, u, a) in steps:
        loop = variant_loop(e, u, a, f, init)

        def run(loop=loop):
            for lo in range(0, n, batch):
                hi = min(n, lo + batch)
                loop(0, hi - lo, *engine._args(tokens[lo:hi], fixed, True, outputs))

        run()  # compile
        times[name] = best_of(run, repeat) / n
    out, before = {}, 0.0
    for name, _ in steps:
        out[name] = times[name] - before if name != "channel + loop" else times[name]
        before = times[name]
    out["engine total (ablation)"] = times["answer"]
    return out


class _Timers:
    """Wall time summed per label, around the calls ``measure()`` makes."""

    def __init__(self):
        self.t: dict[str, float] = {}

    def wrap(self, label, fn):
        def timed(*args, **kwargs):
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.t[label] = self.t.get(label, 0.0) + time.perf_counter() - t

        return timed


def measure_stages(spec, fam, T) -> dict:
    """Seconds per input of each call ``measure()`` makes, on one thread."""
    import sketchsim.sketch.entry_tally as et
    import sketchsim.sketch.measure as tr
    import sketchsim.sketch.threaded_run as run

    proto, params, source = resolve_spec(spec)
    timers = _Timers()

    class OneThread(Engine):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            self.threads = 1

    saved = {
        (tr, "Engine"): tr.Engine,
        (run, "match_answers"): run.match_answers,
        (tr, "group_transcripts"): tr.group_transcripts,
        (tr, "_certify_collision"): tr._certify_collision,
        (tr, "protocol_report"): tr.protocol_report,
        (et.EntryTally, "add"): et.EntryTally.add,
        (Engine, "run_into"): Engine.run_into,
    }
    fam_tokens = fam.variable_tokens
    try:
        tr.Engine = OneThread
        run.match_answers = timers.wrap("answer check", run.match_answers)
        tr.group_transcripts = timers.wrap("grouping", tr.group_transcripts)
        tr._certify_collision = timers.wrap("collision check", tr._certify_collision)
        tr.protocol_report = timers.wrap("entropies + report", tr.protocol_report)
        et.EntryTally.add = timers.wrap("entry tally", et.EntryTally.add)
        Engine.run_into = timers.wrap("engine", Engine.run_into)
        fam.variable_tokens = timers.wrap("input generation", fam_tokens)
        tr.measure(fam, T[:256], proto, params, source)  # warm
        timers.t.clear()
        t = time.perf_counter()
        tr.measure(fam, T, proto, params, source)
        total = time.perf_counter() - t
    finally:
        for (obj, name), value in saved.items():
            setattr(obj, name, value)
        del fam.variable_tokens
    n = T.shape[0]
    out = {k: v / n for k, v in timers.t.items()}
    out["other"] = total / n - sum(timers.t.values()) / n
    out["total"] = total / n
    return out


def split(spec, fam, T, repeat) -> dict:
    best = None
    for _ in range(repeat):  # the least disturbed run by total
        m = measure_stages(spec, fam, T)
        if best is None or m["total"] < best["total"]:
            best = m
    eng = engine_stages(spec, fam, T, repeat)
    print(f"  stage split, {spec}, one thread (us per input)")
    for k, v in best.items():
        print(f"    measure: {k:<24} {v * 1e6:9.3f}")
    for k, v in eng.items():
        print(f"    engine:  {k:<24} {v * 1e6:9.3f}")
    return {"measure": best, "engine": eng}


def main_job_ratio(repeat: int) -> dict:
    """Main job (fresh warm processes), block-counts ``measure()`` (in process, warm) and
    the NumPy block-counts peer, on 1M inputs, in turns."""
    import subprocess

    from bench_engine import numpy_block_counts

    from sketchsim.sketch.measure import measure

    cmd = [sys.executable, "-m", "sketchsim", "transcript", "--q", "64", "--s", "7", "--quiet"]
    fam = HardFamily(64, 7, seed=0)
    T = fam.sample_answers(1_000_000)
    proto, params, source = resolve_spec("block-counts")
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)  # caches warm
    measure(fam, T[:4096], proto, params, source)  # compiled, loaded
    job, peer, bc = [], [], []
    for _ in range(repeat):
        t = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        job.append(time.perf_counter() - t)
        t = time.perf_counter()
        numpy_block_counts(fam, T)
        peer.append(time.perf_counter() - t)
        t = time.perf_counter()
        measure(fam, T, proto, params, source)
        bc.append(time.perf_counter() - t)
    out = {"main_job_s": min(job), "numpy_peer_1m_s": min(peer), "ratio": min(job) / min(peer)}
    out.update({"block_counts_1m_s": min(bc), "block_counts_speedup": min(peer) / min(bc)})
    print(
        f"  main job warm {out['main_job_s']:.2f} s, NumPy block-counts peer (1M inputs) "
        f"{out['numpy_peer_1m_s']:.2f} s: {out['ratio']:.2f}x the peer's time; block-counts "
        f"measure() on the same inputs {min(bc):.2f} s: {out['block_counts_speedup']:.2f}x "
        f"faster than the peer",
        flush=True,
    )
    return out


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--inputs", type=int, default=None)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--split", nargs="*", default=["kernel", "block-counts"])
    ap.add_argument("--protocols", nargs="*", default=list(HARD.default_protocols))
    ap.add_argument("--json", default=None)
    ap.add_argument("--main-job", action="store_true", help="also the main job against NumPy")
    args = ap.parse_args(argv)
    n = args.inputs or (5_000 if args.quick else 20_000)
    fam = HardFamily(64, 7, seed=0)
    T = fam.sample_answers(n)
    load = os.getloadavg()[0]
    print(f"load average {load:.1f} on {os.cpu_count()} cores; F(64, 7), {n:,} inputs")
    threads = numba.config.NUMBA_NUM_THREADS  # as many as the engine runs on
    # the higher of two measurements: a limit the machine reached in this run (a first
    # popcount measurement came out at 40-70% of the second in two runs on 2026-12-05)
    bw = max(bandwidth(args.repeat, threads) for _ in range(2))
    pop = max(popcount_rate(args.repeat, threads) for _ in range(2))
    print(f"limits on {threads} threads: copy bandwidth {bw / 1e9:.2f} GB/s (read + write), "
          f"np.bitwise_count {pop / 1e9:.2f} G words/s")  # fmt: skip
    rows = protocol_rows(fam, T, args.protocols, args.repeat, bw, pop)
    bw2, pop2 = bandwidth(args.repeat, threads), popcount_rate(args.repeat, threads)
    print(f"limits again after the rows: {bw2 / 1e9:.2f} GB/s, {pop2 / 1e9:.2f} G words/s")
    splits = {spec: split(spec, fam, T, max(1, args.repeat // 2)) for spec in args.split}
    job = main_job_ratio(max(1, args.repeat // 2)) if args.main_job else None
    rows_out = [
        (f"{r['protocol']} measure() per 1,000 inputs", r["measure_us"] / 1e3, "its roofline",
         r["roofline_us"] / 1e3)
        for r in rows
    ]  # fmt: skip
    if job is not None:
        rows_out.append(
            ("main job (warm)", job["main_job_s"], "NumPy peer 1M", job["numpy_peer_1m_s"])
        )
    report("bench_roofline", rows_out)  # the ratio column is the fraction of the roofline
    if args.json:
        from sketchsim.results import write_json_atomic

        payload = {
            "inputs": n,
            "threads": threads,
            "load_average_start": load,
            "load_average_end": os.getloadavg()[0],
            "bandwidth_bytes_per_s": [bw, bw2],
            "popcount_words_per_s": [pop, pop2],
            "protocols": rows,
            "splits": splits,
            "main_job": job,
            "cpu": _cpu(),
            # the commit of the sketchsim it timed (PYTHONPATH may point at another tree)
            "code": tree_label(os.path.dirname(os.path.dirname(sketchsim.__file__))),
            "time_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        }
        write_json_atomic(args.json, payload)
        print(f"wrote {args.json}")


def doc_tables(before: dict, after: dict) -> str:
    """The markdown tables of docs/benchmarks.md from two ``--json`` files (a test checks them)."""
    lines = [
        "| protocol | input B/input (new) | transcript B | popcount words | roofline | "
        "before: measure() | of roofline | after: measure() | of roofline | after: engine alone "
        "| of roofline |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    rows_before = {r["protocol"]: r for r in before["protocols"]}
    for r in after["protocols"]:
        b = rows_before[r["protocol"]]
        lines.append(
            f"| {r['protocol']} | {r['input_bytes']:,} ({r['input_bytes_new']}) | "
            f"{r['transcript_bytes']:,} | {r['popcount_words']:,} | {r['roofline_us']:.3f} us "
            f"({r['bound_by']}) | {b['measure_us']:.2f} us | {100 * b['fraction_measure']:.1f}% | "
            f"{r['measure_us']:.2f} us | {100 * r['fraction_measure']:.1f}% | "
            f"{r['engine_us']:.2f} us | {100 * r['fraction_engine']:.1f}% |"
        )
    out = ["\n".join(lines)]
    for spec in after["splits"]:
        sb, sa = before["splits"][spec], after["splits"][spec]
        rows = [f"| stage ({spec}, one thread) | before | after |", "|---|---|---|"]
        for part in ("measure", "engine"):
            for key, value in sa[part].items():
                label = f"{part}: {key}"
                rows.append(f"| {label} | {sb[part][key] * 1e6:.3f} us | {value * 1e6:.3f} us |")
        out.append("\n".join(rows))
    return "\n\n".join(out) + "\n"


def _cpu() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


if __name__ == "__main__":
    if sys.argv[1:2] == ["--doc"]:  # the tables of docs/benchmarks.md from two JSON files
        with open(sys.argv[2]) as fb, open(sys.argv[3]) as fa:
            print(doc_tables(json.load(fb), json.load(fa)), end="")
    else:
        main()
