"""A recipe on every row (#63): what training fixed by hand, derived, never read as words."""

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from sketchsim.experiments.recipe import recipe
from sketchsim.runs.capacity import file_recipe, measure_weights
from sketchsim.sketch.weights_file import load_weights

DOCS = Path(__file__).resolve().parents[2] / "docs" / "capacity" / "frontier"


def test_each_hand_fixed_choice_is_named():
    arch = {"rank": 1, "value_width": 8, "feature_map": "elu1sum"}
    assert recipe(arch, 8) == ["d = q", "constant feature"]
    assert recipe({**arch, "feature_map": "elu1"}, 4) == []
    assert recipe({"rank": 16, "value_width": 1, "feature_map": "elu1"}, 8) == ["r = 2q"]
    assert recipe({"rank": 8, "value_width": 3, "feature_map": "relu"}, 8) == ["r = q"]
    training = {"train_noise": 4, "rebase_at": 100, "keep": "best", "weight_l1": 1e-4,
                "train_bits": 6, "train_rounding": "cut", "qat_from": "fit"}  # fmt: skip
    assert recipe({"rank": 2, "value_width": 3}, 4, training) == [
        "readout basis", "register noise K=4", "trained at K=6 bits at the cut after the float fit",
        "keep-best", "weight L1 0.0001"]  # fmt: skip
    # header claims of the wrong type count as absent
    assert recipe({"rank": "1", "value_width": True}, 1, {"train_noise": "4"}) == []


def test_the_committed_f64_model_owes_its_layout_to_the_recipe():
    # the audit of #61/#63: d = q, a constant feature and the readout basis are the
    # construction's layout, given by hand, not found by training
    w = load_weights(DOCS / "s7/elu1sum/rebase/hard-q64-s7-linear-elu1sum-L1-H1-r1-d64-lr0.001"
                     "-seed0.npz")  # fmt: skip
    assert file_recipe(w, 64) == ["d = q", "constant feature", "readout basis",
                              "register noise K=4", "keep-best"]  # fmt: skip


def test_a_header_recipe_is_derived_again_not_read(tmp_path):
    src = DOCS / "mqar/mqar_pairs_128-q64-s3-linear-elu1-L1-H1-r128-d1-lr0.03-seed0.npz"
    with np.load(src) as z:
        data = {k: z[k] for k in z.files}
    head = json.loads(data["header"].tobytes())
    head["recipe"] = ["nothing by hand"]
    data["header"] = np.frombuffer(json.dumps(head).encode(), dtype=np.uint8)
    np.savez(tmp_path / "x.npz", **data)
    assert file_recipe(load_weights(tmp_path / "x.npz"), 64) == ["r = 2q", "register noise K=4",
                                                             "keep-best"]  # fmt: skip


def test_a_sweep_row_its_file_and_its_capacity_row_carry_one_recipe(tmp_path):
    pytest.importorskip("torch")
    from sketchsim.cli import main

    out, w = tmp_path / "s.json", tmp_path / "w"
    argv = (
        "sweep --suite capacity --q 2 --s 1 --seeds 1 --steps 3 --layers 1 --arch linear "
        "--feature-map elu1sum --ranks 1 --value-widths 2 --keep best"
    ).split()
    argv += ["--save-weights", str(w), "--json", str(out)]
    res = CliRunner().invoke(main, argv)
    assert res.exit_code == 0, res.output
    row = json.loads(out.read_text())["runs"][0]
    assert row["recipe"] == ["d = q", "constant feature", "keep-best"]
    path = w / row["weights"]
    assert load_weights(path).header["recipe"] == row["recipe"]
    assert measure_weights(path, samples=64)["recipe"] == row["recipe"]
