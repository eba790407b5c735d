"""Proving "right on every input" against enumerating every input (issue #61).

Run: python benchmarks/bench_prove.py [--q 8] [--repeat 3] [--quick]

A causal model built to be right on every input of F(q, 7)
(:func:`sketchsim.prove.examples.counting_model`, d = q, K = 4, rounding cut) is
decided two ways, in this process, one after the other:

- ``prove``: boxes of answer values bounded in interval arithmetic
  (:func:`sketchsim.prove.search.prove`), the verdict for all ``8^q`` inputs;
- enumeration: every one of the ``8^q`` answer vectors run through the engine
  (:func:`sketchsim.sketch.causal.causal_inputs`, 2^18 inputs per call), the way
  ``capacity`` decides an enumerable family.

Both must say "right on every input". Warm times (numba compiled first), min of
repeats; a time is this machine's at that moment, not a claim.  ``--quick``: q = 6.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from ratios import best_of, report  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--q", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    q = 6 if args.quick else args.q
    from sketchsim.prove.examples import counting_model
    from sketchsim.prove.search import prove
    from sketchsim.sketch.causal import causal_inputs
    from sketchsim.sketch.family import HardFamily
    from sketchsim.sketch.weights_file import load_weights, save_weights_file

    fam = HardFamily(q, 7)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "w.npz")
        save_weights_file(path, *counting_model(fam, 4))
        w = load_weights(path)

    def proved():
        out = prove(w, fam, 4, "cut")
        assert out.verdict == "proved", out
        return out

    def enumerated():
        chunk = 2**18
        total = 8**q
        for start in range(0, total, chunk):
            idx = np.arange(start, min(total, start + chunk), dtype=np.int64)
            T = (idx[:, None] // (8 ** np.arange(q - 1, -1, -1))) % 8
            ans, _ = causal_inputs(w, fam, 4, T, "cut")
            assert (ans == T).all()

    proved()
    causal_inputs(w, fam, 4, np.zeros((1, q), np.int64), "cut")  # compile
    out = proved()
    print(f"F({q},7): proved with {out.boxes} boxes, {out.leaves} leaves; enumerating {8**q:,}")
    ours = best_of(proved, args.repeat)
    theirs = best_of(enumerated, 1 if q >= 8 else args.repeat)
    report("bench_prove", [(f"right on all 8^{q} inputs, F({q},7)", ours, "enumerate (engine)",
                            theirs)])  # fmt: skip


if __name__ == "__main__":
    main()
