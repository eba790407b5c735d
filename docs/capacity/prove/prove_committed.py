"""Re-label every committed causal weights file of docs/capacity with what ``prove`` finds.

Run from the repository root: python docs/capacity/prove/prove_committed.py

For each ``hard-*.npz`` under docs/capacity (causal files trained on F(q, s)), at
K = 3..12 bits, rounding ``cut`` (the rounding the committed capacity tables
measured), ``sketchsim.api.prove`` with a 30-second budget; each ``mqar*.npz`` at
K = 4, 8 and 12 (MQAR's superset, :mod:`sketchsim.prove.mqar`); and the hand-built
counting model at F(64,7), K = 3 (:func:`sketchsim.prove.examples.counting_model`:
the construction's layout, not trained).  Writes docs/capacity/prove/committed.json
(the rows, the parameters, versions).
"""

from __future__ import annotations

import glob
import os
import tempfile

from sketchsim.api import prove
from sketchsim.prove.examples import counting_model
from sketchsim.results import result_payload, write_json_atomic
from sketchsim.sketch.family import HardFamily
from sketchsim.sketch.weights_file import save_weights_file

HERE = os.path.dirname(os.path.abspath(__file__))
BITS = tuple(range(3, 13))


def main() -> None:
    root = os.path.dirname(HERE)
    rows = []
    for path in sorted(glob.glob(os.path.join(root, "**", "hard-*.npz"), recursive=True)):
        rel = os.path.relpath(path, os.path.dirname(os.path.dirname(root)))
        for bits in BITS:
            r = prove(path, bits, "cut", budget=30.0)
            rows.append({
                "weights": rel, "weights_sha256": r.weights_sha256, "bits": bits,
                "rounding": "cut", "verdict": r.verdict, "boxes": r.boxes,
                "open_boxes": r.open_boxes, "leaves": r.leaves,
                "counterexample": r.counterexample, "engine_answers": r.engine_answers,
                "cut_bits": r.cut_bits, "bound_bits": r.bound_bits,
                "ratio": round(r.cut_bits / r.bound_bits, 4), "seconds": r.seconds,
            })  # fmt: skip
            print(rel, bits, r.verdict, r.seconds, flush=True)
    mqar = []  # MQAR files: K = 4, 8, 12 (each a 30 s budget: the superset, prove.mqar)
    for path in sorted(glob.glob(os.path.join(root, "**", "mqar*.npz"), recursive=True)):
        rel = os.path.relpath(path, os.path.dirname(os.path.dirname(root)))
        for bits in (4, 8, 12):
            r = prove(path, bits, "cut", budget=30.0)
            mqar.append({"weights": rel, "bits": bits, "verdict": r.verdict, "boxes": r.boxes,
                         "open_boxes": r.open_boxes, "cut_bits": r.cut_bits,
                         "bound_bits": r.bound_bits, "seconds": r.seconds})  # fmt: skip
            print(rel, bits, r.verdict, r.seconds, flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "counting-q64-s7.npz")
        save_weights_file(path, *counting_model(HardFamily(64, 7), 3))
        r = prove(path, 3, "cut", budget=60.0)
    built = {"model": "counting_model(F(64,7), K = 3)", "bits": 3, "rounding": "cut",
             "verdict": r.verdict, "leaves": r.leaves, "boxes": r.boxes,
             "cut_bits": r.cut_bits, "bound_bits": r.bound_bits,
             "ratio": round(r.cut_bits / r.bound_bits, 4), "seconds": r.seconds}  # fmt: skip
    params = {"bits": list(BITS), "rounding": "cut", "budget": 30.0}
    result = {"rows": rows, "mqar": mqar, "construction": built}
    write_json_atomic(os.path.join(HERE, "committed.json"), result_payload("prove", params, result))


if __name__ == "__main__":
    main()
