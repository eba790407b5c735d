"""The cut state's code of the answers (sketchsim.experiments.state_code): the committed
file is what the function gives, and its rounding budget predicts the engine's accuracy."""

import importlib.util
import json
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="the torch extra is not installed")

from sketchsim.errors import SketchsimError  # noqa: E402
from sketchsim.experiments.state_code import state_code  # noqa: E402

S7 = Path(__file__).resolve().parents[2] / "docs" / "capacity" / "frontier" / "s7"


def _script():
    spec = importlib.util.spec_from_file_location("make_state_code", S7 / "make_state_code.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_file_is_what_state_code_gives():
    committed = json.loads((S7 / "state-code.json").read_text())
    assert committed["parameters"] == _script().PARAMS
    for got, want in zip(_script().rows(), committed["rows"], strict=True):
        assert got.keys() == want.keys()
        for key in ("weights", "entries", "inputs", "seed", "float_accuracy"):
            assert got[key] == want[key], key
        for key in ("residual_max", "residual_p99", "readers_median", "cut_over_span_median"):
            assert got[key] == pytest.approx(want[key], rel=1e-9, abs=1e-12), key
        for g, w in zip(got["per_bits"], want["per_bits"], strict=True):
            assert g == pytest.approx(w, rel=1e-9, abs=1e-12)


def test_the_rounding_budget_predicts_the_engines_accuracy_at_the_cut():
    """On the kept F(32,7) model (small fit residual) the normal approximation of the
    rounding at the cut is within 0.05 of the engine's accuracy (rounding=cut) at every
    K on capacity's screen; more bits never predict fewer inputs right."""
    rows = {r["weights"]: r for r in json.loads((S7 / "state-code.json").read_text())["rows"]}
    code = rows["keep-best/hard-q32-s7-deltanet-L1-H1-r1-d32-lr0.003-seed0.npz"]
    curve = json.loads((S7 / "keep-best" / "capacity-cut.json").read_text())["rows"][0]["curve"]
    float_acc = curve[-1]["accuracy"]
    for b in code["per_bits"]:
        engine = curve[b["bits"] - 1]["accuracy"]
        assert abs(min(b["all_right_normal"], float_acc) - engine) < 0.05, b["bits"]
    predicted = [b["all_right_normal"] for b in code["per_bits"]]
    assert predicted == sorted(predicted)
    assert code["readers_median"] > 0.5 * code["entries"]  # an answer reads most entries


def test_only_one_layer_one_head_causal_files(tmp_path):
    from weights_files import random_causal_weights, random_weights

    from sketchsim.sketch.family_plugins import make_family

    fam = make_family("hard", 3, 1)
    random_weights(tmp_path / "k.npz", fam, 1, 1, 2, 2, "elu1")
    random_causal_weights(tmp_path / "c.npz", fam, "gla", 2, 1, 2, 2)
    for name in ("k.npz", "c.npz"):
        with pytest.raises(SketchsimError, match="one-layer, one-head causal models"):
            state_code(tmp_path / name)
    one = random_causal_weights(tmp_path / "one.npz", fam, "deltanet", 1, 1, 1, 3)
    row = state_code(one.path, inputs=64)
    assert row["entries"] == 3 and row["inputs"] == 8  # F(3,1) has 8 inputs: all of them
    assert [b["bits"] for b in row["per_bits"]] == list(range(1, 13))
