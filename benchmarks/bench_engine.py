"""Sketch-engine throughput at F(64, 7), with the peers of issue 11, measured in this run.

Run: python benchmarks/bench_engine.py [--quick] [--inputs N] [--main-job]

Rows (minimum over repeats; rates in inputs per second):

- block-counts: the jitted engine alone (tokens built beforehand), sketchsim's end
  to end ``measure`` (inputs built in chunks, engine, grouping, entropies), and the
  NumPy a user would write (the data token per THEORY section 5 as 0/1 bytes, its
  block bits gathered in position order, block counts by a reshaped sum, grouping
  by packed keys with ``np.unique``).
- raw: today's plan, the plan as it was before issue 11 (``RAW_BEFORE`` below: the
  query re-reads its own fields for every other token) on the same engine, and
  NumPy dense Min-IP (``np.bitwise_count`` of all token pairs).
- kernel: the jitted engine against the plain-Python reference engine.
- ``--main-job``: ``sketchsim transcript --q 64 --s 7`` (seven protocols,
  100,000 inputs) as a fresh process, cold (empty numba and engine caches) and
  then warm.

Every fast path is checked against its peer on the same inputs before it is timed.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
from numba import njit

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ratios import report  # noqa: E402

from sketchsim.minip.bits import popcount64  # noqa: E402
from sketchsim.sketch import HardFamily, Layer, Plan, Protocol  # noqa: E402
from sketchsim.sketch.engine import Engine  # noqa: E402
from sketchsim.sketch.measure import measure  # noqa: E402
from sketchsim.sketch.packed_tokens import field  # noqa: E402
from sketchsim.sketch.plugins import resolve_spec  # noqa: E402

# ---- the raw plan before issue 11 (the peer for raw's speed-up) ---------------------------


@njit
def _raw_emit(layer, pos, bits, ctx, state, aux, out):
    w = int(aux[0])
    for c in range(ctx[2] // w):
        out[c] = field(bits, c * w, w)


@njit
def _raw_update_before(layer, pos, bits, ctx, state, sketch, aux):
    if pos >= ctx[0]:
        return
    w = int(aux[0])
    k = ctx[2] // w
    best = np.int64(1) << 62
    for j in range(ctx[3]):
        ip = np.int64(0)
        for c in range(k):
            ip += popcount64(np.uint64(field(bits, c * w, w) & sketch[j * k + c]))
        best = min(best, ip)
    state[0] = best


@njit
def _raw_answer(pos, bits, ctx, state, aux):
    return state[0]


def _raw_before_setup(ctx, params):
    width = max(w for w in range(1, 33) if ctx.m % w == 0)
    layer = Layer("concat", ctx.m // width, 2**width)
    return Plan([layer], 1, _raw_emit, _raw_update_before, _raw_answer, aux=[width])


# builtin=True: the same engine flags as the built-in raw (no bounds checking)
RAW_BEFORE = Protocol("raw-before", "raw as before issue 11", _raw_before_setup, builtin=True)


# ---- NumPy peers ------------------------------------------------------------------------


def numpy_block_counts(fam: HardFamily, T: np.ndarray, chunk: int = 4096):
    """block-counts end to end in NumPy: data tokens, counts, answers, grouping, entropy.

    The data token as 0/1 bytes per THEORY section 5 (block ``i`` holds ``t_i`` ones
    at the family's seeded positions), its block counts, the answers, and the
    transcripts grouped by packed keys.  The counts are made ``chunk`` inputs at a
    time, as a user would once the whole (B, m) byte arrays no longer fit in cache:
    at 1,000,000 inputs the one-shot version (``chunk=None``) takes 4.4 s here
    against 1.3 s chunked, nearly all of it in the gather of 448 MB (issue #31).
    """
    B, q, s = T.shape[0], fam.q, fam.s
    # bit r of block i is set when r < t_i, at position perm[i, r]: the block bits in
    # position order are a gather by the inverse permutation (5x faster than scattering
    # into a zeroed (B, m) array, the peer of session 1); the pad bits are zero
    inverse = np.argsort(fam.perm.ravel())
    below = np.arange(s, dtype=np.uint8)
    counts = np.empty((B, q), dtype=np.uint8)
    step = B if chunk is None else chunk
    for lo in range(0, B, max(1, step)):
        t = T[lo : lo + step]
        ones = (t[:, :, None] > below).reshape(t.shape[0], q * s)
        data = ones[:, inverse]
        counts[lo : lo + step] = data.reshape(t.shape[0], q, s).sum(axis=2, dtype=np.uint8)
    correct = (counts == T).all(axis=1)
    keys = np.ascontiguousarray(counts).view(np.dtype((np.void, q))).ravel()
    _, group_counts = np.unique(keys, return_counts=True)
    p = group_counts / B
    entropy = float(-(p * np.log2(p)).sum())
    return counts, correct, group_counts.size, entropy


def numpy_min_ip(tokens: np.ndarray, q: int, chunk: int = 256) -> np.ndarray:
    """Min-IP answers at the q queries by dense comparison of every token pair."""
    out = np.empty((tokens.shape[0], q), dtype=np.int64)
    for lo in range(0, tokens.shape[0], chunk):
        t = tokens[lo : lo + chunk]
        ip = np.bitwise_count(t[:, :q, None, :] & t[:, None, :, :]).sum(axis=-1, dtype=np.int64)
        out[lo : lo + chunk] = ip.min(axis=2)
    return out


# ---- timing -----------------------------------------------------------------------------


def best_of(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def engine_for(spec_or_proto, fam, python=False):
    if isinstance(spec_or_proto, Protocol):
        proto, params = spec_or_proto, {}
    else:
        proto, params, _ = resolve_spec(spec_or_proto)
    return Engine(proto.plan(fam.context(), params), fam.context(), proto.name, python=python)


def row(label, rate, peer=None, peer_rate=None):
    text = f"  {label:<44} {rate:>12,.0f} inputs/s"
    if peer is not None:
        text += f"   {rate / peer_rate:>7.1f}x {peer}"
    print(text, flush=True)


def main_job(repeat: int) -> None:
    cmd = [sys.executable, "-m", "sketchsim", "transcript", "--q", "64", "--s", "7", "--quiet"]
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "NUMBA_CACHE_DIR": tmp + "/numba", "SKETCHSIM_CACHE_DIR": tmp}
        for label in ["cold"] + ["warm"] * repeat:
            t = time.perf_counter()
            before = os.times()
            subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
            cpu = os.times().children_user + os.times().children_system
            cpu -= before.children_user + before.children_system
            print(
                f"  main job ({label}): {time.perf_counter() - t:.1f} s wall, {cpu:.1f} s CPU",
                flush=True,
            )


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--inputs", type=int, default=None)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--main-job", action="store_true")
    args = ap.parse_args()
    n = args.inputs or (20_000 if args.quick else 100_000)
    fam = HardFamily(64, 7, seed=0)
    T = fam.sample_answers(n)
    tokens = fam.tokens(T)
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"F(64, 7): m = {fam.m}, N = {fam.n_tokens}, {n:,} inputs, min of {args.repeat}")

    print("block-counts")
    bc = engine_for("block-counts", fam)
    res = bc.run(tokens)
    counts, correct, distinct, _ = numpy_block_counts(fam, T)
    assert np.array_equal(res.answers, counts) and correct.all()
    rep = measure(fam, T, *resolve_spec("block-counts")[:2])
    assert rep.distinct_transcripts == distinct and rep.correct_fraction == 1.0
    t_np = best_of(lambda: numpy_block_counts(fam, T), args.repeat)
    t_engine = best_of(lambda: bc.run(tokens), args.repeat)
    t_e2e = best_of(lambda: measure(fam, T, *resolve_spec("block-counts")[:2]), args.repeat)
    row("NumPy end to end (the peer)", n / t_np)
    row("sketchsim engine (tokens prebuilt)", n / t_engine, "NumPy", n / t_np)
    row("sketchsim measure() end to end", n / t_e2e, "NumPy", n / t_np)
    rows = [
        ("block-counts measure() F(64,7)", t_e2e, "NumPy end to end", t_np),
        ("block-counts engine, tokens prebuilt", t_engine, "NumPy end to end", t_np),
    ]

    print("raw")
    n_slow = min(n, 2_000 if args.quick else 5_000)
    raw, before = engine_for("raw", fam), engine_for(RAW_BEFORE, fam)
    a, b = raw.run(tokens[:n_slow]), before.run(tokens[:n_slow])
    ref = numpy_min_ip(tokens[:n_slow], fam.q)
    assert np.array_equal(a.answers, b.answers) and np.array_equal(a.answers, ref)
    assert np.array_equal(a.fingerprints, b.fingerprints)
    t_before = best_of(lambda: before.run(tokens[:n_slow]), max(1, args.repeat // 2))
    t_numpy = best_of(lambda: numpy_min_ip(tokens[:n_slow], fam.q), max(1, args.repeat // 2))
    t_raw = best_of(lambda: raw.run(tokens), args.repeat)
    row(f"raw before issue 11 ({n_slow:,} inputs)", n_slow / t_before)
    row(f"NumPy dense Min-IP ({n_slow:,} inputs)", n_slow / t_numpy)
    row("raw now", n / t_raw, "raw before", n_slow / t_before)
    print(f"  {'':<59} {(n / t_raw) / (n_slow / t_numpy):>16.1f}x NumPy")
    rows.append(("raw engine (per input)", t_raw / n, "raw before issue 11", t_before / n_slow))
    rows.append(("raw engine (per input)", t_raw / n, "NumPy dense Min-IP", t_numpy / n_slow))

    print("kernel (identity values, r = 1, 8 bits)")
    n_py = min(n, 20 if args.quick else 50)
    jit, py = engine_for("kernel", fam), engine_for("kernel", fam, python=True)
    a, b = jit.run(tokens[:n_py]), py.run(tokens[:n_py])
    assert np.array_equal(a.fingerprints, b.fingerprints) and np.array_equal(a.answers, b.answers)
    t_py = best_of(lambda: py.run(tokens[:n_py]), 1)
    t_jit = best_of(lambda: jit.run(tokens), args.repeat)
    row(f"Python reference engine ({n_py} inputs)", n_py / t_py)
    row("jitted engine", n / t_jit, "Python", n_py / t_py)
    rows.append(("kernel engine (per input)", t_jit / n, "plain-Python engine", t_py / n_py))
    print("ratios (same run)")
    report("bench_engine", rows)

    if args.main_job:
        print("sketchsim transcript --q 64 --s 7 (fresh processes)")
        main_job(max(1, args.repeat // 2))


if __name__ == "__main__":
    main()
