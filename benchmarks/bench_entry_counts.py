"""Per-entry value counting (entry entropy, used bits) against the peers a user would write.

Run: python benchmarks/bench_entry_counts.py [--quick]

Rows (minimum over repeats, seconds; ratio = peer / ours):

- ``EntryCounts.add``: sketchsim's sparse counter (one sort per entry column,
  runs merged into sorted (entry, value, count) triples), fed in chunks.
- ``EntryTally``: what ``measure`` uses, fed in batches of 512 rows: entries
  with at most 4,096 possible values (declared ranges) counted in a dense table
  by a jitted loop; the others keep their first value while constant (one jitted
  pass per batch), and only the ones that vary are gathered and sorted per entry.
- two harder cases for that sparse path, on a quarter of the rows: every wide
  entry varying, with 3 values (counted in each entry's small table around its
  first value) and with 24-bit values (gathered and sorted: about one run per
  value and flush, the flushes' sorted runs merged in one linear pass at the end).
- per-column ``np.unique(return_counts=True)`` in a Python loop (the NumPy a
  user would write), and ``collections.Counter`` per column (the naive one).
- the cost inside ``measure``: the engine with exact transcripts stored versus
  fingerprints only, on F(64, 7) (stored transcripts feed the counter).

Both peers are checked to give the same counts before timing.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ratios import report  # noqa: E402

from sketchsim.sketch.entry_counts import EntryCounts  # noqa: E402
from sketchsim.sketch.entry_tally import EntryTally  # noqa: E402


def best(fn, repeats):
    out = None
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def ours(tr, chunk):
    acc = EntryCounts(tr.shape[1])
    for lo in range(0, tr.shape[0], chunk):
        acc.add(tr[lo : lo + chunk])
    return acc


def tally(tr, ranges, batch=512):
    acc = EntryTally(ranges)
    for lo in range(0, tr.shape[0], batch):
        block = np.ascontiguousarray(tr[lo : lo + batch])
        acc.add(block, block.shape[0])
    return acc.result()


def numpy_peer(tr):
    return [np.unique(tr[:, e], return_counts=True) for e in range(tr.shape[1])]


def naive_peer(tr):
    return [Counter(tr[:, e].tolist()) for e in range(tr.shape[1])]


def same(acc, peer):
    for e, (vals, counts) in enumerate(peer):
        sel = acc.entry == e
        if not (np.array_equal(acc.value[sel], vals) and np.array_equal(acc.count[sel], counts)):
            return False
    return True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    n = 5_000 if args.quick else 20_000
    reps = 2 if args.quick else 3
    rng = np.random.default_rng(0)
    shapes = {
        # kernel at F(64, 7): 457 sum registers with small counts
        "kernel-like (457 entries, values < 66)": (rng.integers(0, 66, (n, 457)), 66),
        # raw at F(64, 7): 1,235 concat fields of 24 bits, most of them constant
        "raw-like (1,235 entries, 24-bit values)": (
            np.where(np.arange(1235) < 1216, 7, rng.integers(0, 1 << 24, (n, 1235))),
            1 << 24,
        ),
        # the sparse path's harder cases: every wide entry varies
        "all-varying (1,235 entries, 3 values, 24-bit range)": (
            rng.integers(0, 3, (n // 4, 1235)),
            1 << 24,
        ),
        "all-varying (1,235 entries, 24-bit values)": (
            rng.integers(0, 1 << 24, (n // 4, 1235)),
            1 << 24,
        ),
    }
    rows = []
    print(f"seconds (min of {reps}); ratio = peer / EntryCounts, EntryTally: np.unique / it")
    for name, (tr, size) in shapes.items():
        tr = np.ascontiguousarray(tr, dtype=np.int64)
        ranges = np.full(tr.shape[1], size, dtype=np.int64)
        t_ours, acc = best(lambda tr=tr: ours(tr, 4096), reps)
        t_tally, acc2 = best(lambda tr=tr, r=ranges: tally(tr, r), reps)
        t_np, peer = best(lambda tr=tr: numpy_peer(tr), reps)
        assert same(acc, peer) and same(acc2, peer), name
        label = name.split(" (")[0] + (", 3 values" if "3 values" in name else "")
        rows.append((f"EntryTally {label}", t_tally, "np.unique per column", t_np))
        t_naive, _ = best(lambda tr=tr: naive_peer(tr), 1)
        print(f"{name}, {tr.shape[0]:,} transcripts")
        print(f"  EntryCounts.add (chunks of 4,096)   {t_ours:8.3f}")
        print(f"  EntryTally (batches of 512)        {t_tally:8.3f}   x{t_np / t_tally:.1f}")
        print(f"  np.unique per column               {t_np:8.3f}   x{t_np / t_ours:.1f}")
        print(f"  Counter per column (naive)         {t_naive:8.3f}   x{t_naive / t_ours:.1f}")

    from sketchsim.sketch import HardFamily
    from sketchsim.sketch.engine import Engine
    from sketchsim.sketch.plugins import resolve_spec

    fam = HardFamily(64, 7)
    tokens = fam.tokens(fam.sample_answers(n // 4))
    for spec in ("block-counts", "kernel"):
        proto, params, _ = resolve_spec(spec)
        eng = Engine(proto.plan(fam.context(), params), fam.context(), proto.name)
        eng.run(tokens[:64])
        t_fp, _ = best(lambda eng=eng: eng.run(tokens), reps)
        t_st, res = best(lambda eng=eng: eng.run(tokens, store=True), reps)
        t_cnt, _ = best(lambda res=res: ours(res.transcripts, 4096), reps)
        print(
            f"{spec} on F(64, 7), {tokens.shape[0]:,} inputs: engine {t_fp:.3f} s, "
            f"with transcripts stored {t_st:.3f} s, counting them {t_cnt:.3f} s "
            f"(measure overhead x{(t_st + t_cnt) / t_fp:.2f})"
        )
    report("bench_entry_counts", rows)


if __name__ == "__main__":
    main()
