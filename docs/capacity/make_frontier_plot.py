"""Draws frontier.png: the smallest decoding trained state per causal architecture against q.

Run from the repository root: ``python docs/capacity/make_frontier_plot.py`` (plot
extra).  It reads only committed ``sketchsim capacity`` files (:data:`SOURCES`),
merges their rows and hands them to
:func:`sketchsim.runs.plots.plot_trained_frontier`: filled markers are the
frontier (:func:`sketchsim.runs.capacity.frontier_rows`, models right on every
input run), open ones the models that keep their 32-bit accuracy (at least
0.99) on their screen at fewer bits but decode no sample
(:func:`sketchsim.runs.plots.screen_points`); where a model's weights file is
committed beside its capacity file, a frontier point ``prove`` proved is boxed
green and a model it refuted is a red cross, off the frontier (prove/committed.json).
tests/experiments/test_capacity_doc.py draws it again from the same files.
"""

import json
from pathlib import Path

from sketchsim.runs.plots import plot_trained_frontier

HERE = Path(__file__).resolve().parent
#: The capacity files, relative to this folder: the #44 sweep (q <= 16, s = 1, 3,
#: rounded every token), DeltaNet at s = 7, the batched s = 7 grid and elu1sum in float,
#: trained for the bits, with register noise and in the readout basis (rounded at the
#: cut), and F(64,7).
SOURCES = (
    "causal/capacity.json",
    "frontier/s7/capacity-deltanet-q16-cut.json",
    "frontier/s7/capacity-deltanet-q32-cut.json",
    "frontier/s7/keep-best/capacity-cut.json",
    "frontier/s7/qat/capacity-K4-cut.json",
    "frontier/s7/qat/capacity-K5-cut.json",
    "frontier/f64/capacity-elu1-d64.json",
    "frontier/s7/grid/capacity-q16-cut.json",
    "frontier/s7/grid/capacity-q32-cut.json",
    *(f"frontier/s7/elu1sum/float/capacity-q{q}-cut.json" for q in (4, 8, 16)),
    "frontier/s7/elu1sum/float/capacity-q64-20000-cut.json",
    "frontier/s7/elu1sum/qat/capacity-q8-K4-fit-cut.json",
    "frontier/s7/elu1sum/noise/capacity-q8-cut.json",
    "frontier/s7/elu1sum/noise/capacity-q16-20000-cut.json",
    "frontier/s7/elu1sum/noise/capacity-q32-cut.json",
    "frontier/s7/elu1sum/noise/capacity-q64-cut.json",
    *(f"frontier/s7/elu1sum/rebase/capacity-q{q}-cut.json" for q in (4, 8, 16, 32, 64)),
    *(
        f"frontier/s7/elu1sum/rebase/capacity-q32-lr{lr}-after0.0001-cut.json"
        for lr in ("0.003", "0.001")
    ),
    *(
        f"frontier/s7/rebase-kinds/capacity-{k}-q16-cut.json"
        for k in ("gla", "gated-deltanet", "deltanet", "based")
    ),
    *(f"frontier/s7/rebase-kinds/capacity-gla-q32{n}-cut.json" for n in ("", "-44000", "-70000")),
)


def merged_rows() -> list[dict]:
    """Every row of :data:`SOURCES`, each with what ``prove`` found at its K where its
    weights file is committed beside its capacity file (prove/committed.json)."""
    proved = json.loads((HERE / "prove" / "committed.json").read_text())["rows"]
    verdicts = {(r["weights"], r["bits"]): r["verdict"] for r in proved}
    rows = []
    for name in SOURCES:
        folder = f"docs/capacity/{Path(name).parent}"
        for r in json.loads((HERE / name).read_text())["rows"]:
            v = verdicts.get((f"{folder}/{r['weights']}", r["bits_per_coordinate"]))
            rows.append({**r, "evidence": v} if v in ("proved", "refuted") else r)
    return rows


if __name__ == "__main__":
    plot_trained_frontier(merged_rows(), HERE / "frontier.png")
