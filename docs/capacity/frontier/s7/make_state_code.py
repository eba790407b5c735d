"""Writes state-code.json: how the committed DeltaNet models' cut states code the answers.

Run from the repository root: ``python docs/capacity/frontier/s7/make_state_code.py``
(torch extra).  See :mod:`sketchsim.experiments.state_code`;
tests/test_doc_numbers.py checks docs/capacity.md against the file and
tests/experiments/test_state_code.py recomputes it.
"""

from pathlib import Path

from sketchsim.experiments.state_code import state_code
from sketchsim.results import result_payload, write_json_atomic

HERE = Path(__file__).resolve().parent
#: The models, relative to this folder; 4,096 sampled inputs, seed 0.
MODELS = (
    "hard-q16-s7-deltanet-L1-H1-r1-d16-lr0.003-seed0.npz",
    "hard-q32-s7-deltanet-L1-H1-r1-d32-lr0.003-seed0.npz",
    "keep-best/hard-q32-s7-deltanet-L1-H1-r1-d32-lr0.003-seed0.npz",
    "qat/hard-q16-s7-deltanet-L1-H1-r1-d16-lr0.003-K4-seed0.npz",
)
PARAMS = {"models": list(MODELS), "inputs": 4096, "seed": 0, "bits": list(range(1, 13))}


def rows() -> list[dict]:
    """One :func:`state_code` row per model, named by its path in this folder."""
    out = []
    for name in MODELS:
        row = state_code(HERE / name, PARAMS["inputs"], PARAMS["seed"], PARAMS["bits"])
        out.append({**row, "weights": name})
    return out


if __name__ == "__main__":
    import torch

    torch.set_num_threads(1)
    write_json_atomic(HERE / "state-code.json",
                      result_payload("state-code", PARAMS, {"rows": rows()}))  # fmt: skip
