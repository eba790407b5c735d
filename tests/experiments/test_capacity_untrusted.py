"""The capacity sweep never writes a weights file that describes another model (issue 47,
cases 8 and 9), and its resume knows the model plug-in's file (case 1)."""

import json

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from sketchsim.cli import main
from sketchsim.errors import PluginError
from sketchsim.experiments.capacity_suite import CapacitySpec, run_capacity
from sketchsim.runs.capacity import measure_weights

SOFTPLUS = """
import torch
from torch.nn import functional as F
from sketchsim.experiments.capacity_models import KernelLayer
from sketchsim.experiments.model_plugins import ModelType


class Softplus(KernelLayer):
    '''Softplus features kept under the label the engine reads as elu1.'''

    def __init__(self, m, heads, r, d, feature_map, eps=1e-6):
        super().__init__(m, heads, r, d, feature_map, eps)
        self.act = F.softplus


class NaNs(KernelLayer):
    '''A layer whose outputs are NaN.'''

    def read(self, u, state):
        y, delta = super().read(u, state)
        return y * float("nan"), delta


SOFT = ModelType("soft", "softplus features", Softplus)
NAN = ModelType("nan", "nan outputs", NaNs)
"""


def _spec(plugin, name, seed=0, steps=150):
    return CapacitySpec("hard", 3, 1, "kernel", 1, 1, 2, 4, "elu1", seed, steps=steps,
                        model_plugin=f"{plugin}:{name}")  # fmt: skip


@pytest.fixture()
def plugin(tmp_path):
    path = tmp_path / "layers.py"
    path.write_text(SOFTPLUS)
    torch.set_num_threads(1)
    return path


def test_case8_a_softplus_layer_under_the_elu1_label_is_not_saved(tmp_path, plugin):
    """Was: exported as elu1 and measured as a different model (21.25x, "not decoded")."""
    rows = run_capacity([_spec(plugin, "SOFT")], weights_dir=tmp_path / "w")
    row = rows[0]
    assert row["weights"] is None
    assert "away from the trained model's" in row["weights_refused"]
    assert not (tmp_path / "w").exists() or not list((tmp_path / "w").glob("*.npz"))


def test_an_honest_layer_is_saved_and_its_row_agrees_with_training(tmp_path):
    spec = CapacitySpec("hard", 3, 1, "kernel", 1, 1, 2, 4, "elu1", 0, steps=300)
    row = run_capacity([spec], weights_dir=tmp_path / "w")[0]
    assert row["weights"] and row["weights_refused"] is None
    measured = measure_weights(tmp_path / "w" / row["weights"], samples=64)
    assert measured["accuracy_mismatch"] is False
    assert measured["engine_accuracy_k32"] == pytest.approx(row["accuracy"], abs=0.01)


def test_case9_a_layer_with_non_finite_outputs_gets_no_file(tmp_path, plugin):
    """Was: a weights file `capacity` always refused, which aborted the whole folder."""
    row = run_capacity([_spec(plugin, "NAN", steps=5)], weights_dir=tmp_path / "w")[0]
    assert row["weights"] is None
    assert row["weights_refused"] == "the model's outputs are not finite on 8 of 8 inputs"


def test_case1_sweep_resume_trains_again_after_the_plugin_file_changed(tmp_path, plugin):
    out = tmp_path / "s.json"
    spec = _spec(plugin, "SOFT", steps=5)
    first = run_capacity([spec], path=out)[0]
    again = run_capacity([spec], path=out, resume=True)[0]
    assert again == first  # same file: resumed, not trained again (seconds equal)
    plugin.write_text(SOFTPLUS + "\n# edited\n")
    edited = run_capacity([spec], path=out, resume=True)[0]
    assert edited["plugin_identity"] != first["plugin_identity"]
    assert edited["seconds"] != first["seconds"]
    assert json.loads(out.read_text())["runs"][0]["plugin_identity"] == edited["plugin_identity"]


def test_the_sweep_command_says_why_a_file_was_not_saved(tmp_path, plugin):
    argv = ["sweep", "--suite", "capacity", "--q", "3", "--s", "1", "--seeds", "1",
            "--steps", "100", "--layers", "1", "--ranks", "2", "--value-widths", "4",
            "--model", "kernel", "--model-plugin", f"{plugin}:SOFT",
            "--json", str(tmp_path / "s.json"), "--save-weights", str(tmp_path / "w")]  # fmt: skip
    res = CliRunner().invoke(main, argv)
    assert res.exit_code == 0, res.output
    assert "not saved" in res.output and "away from the trained model" in res.output
    runs = json.loads((tmp_path / "s.json").read_text())["runs"]
    refused = {r["architecture"]: r["weights_refused"] is not None for r in runs}
    assert refused == {"elu1 L1 H1 r2 d4": False, "SOFT L1 H1 r2 d4": True}
    assert [p.name for p in (tmp_path / "w").glob("*.npz")] == [
        r["weights"] for r in runs if r["weights"]
    ]


def test_a_learning_rate_grid_writes_one_file_per_run(tmp_path):
    """Was: the runs of an lr grid wrote one file name, so three of four rows named a file
    holding another run's model."""
    specs = [CapacitySpec("hard", 3, 1, "kernel", 1, 1, 1, 2, "elu1", 0, steps=20, lr=lr)
             for lr in (0.01, 0.1)]  # fmt: skip
    rows = run_capacity(specs, weights_dir=tmp_path / "w")
    names = [r["weights"] for r in rows]
    assert len(set(names)) == 2 and all(names)
    assert sorted(p.name for p in (tmp_path / "w").glob("*.npz")) == sorted(names)
    for row in rows:
        header = json.loads(np.load(tmp_path / "w" / row["weights"])["header"].tobytes())
        assert header["spec"]["lr"] == row["spec"]["lr"]


def test_two_plugins_of_one_name_and_a_plugin_named_like_a_map(tmp_path):
    """Review: plug-ins a.py:L and b.py:L wrote one file; a plug-in named relu aborted the
    sweep.  Since #60 a plug-in may not carry a built-in name at all: the sweep is refused
    before any run trains, in one line, and the others then run."""
    layer = (
        "from sketchsim.experiments.capacity_models import KernelLayer\n"
        "from sketchsim.experiments.model_plugins import ModelType\n"
        "L = ModelType('L', 'the kernel layer under a name of its own', KernelLayer)\n"
    )
    for name in ("a", "b"):
        (tmp_path / f"{name}.py").write_text(layer)
    (tmp_path / "m.py").write_text(
        "from sketchsim.experiments.capacity_models import KernelLayer\n"
        "from sketchsim.experiments.model_plugins import ModelType\n"
        "relu = ModelType('relu', 'a layer named like a map', KernelLayer)\n"
    )
    specs = [
        CapacitySpec(
            "hard", 3, 1, "kernel", 1, 1, 1, 2, "elu1", 0, steps=20, model_plugin=f"{tmp_path / p}"
        )  # fmt: skip
        for p in ("a.py:L", "b.py:L", "m.py:relu")
    ]
    with pytest.raises(PluginError, match="may not be named 'relu'"):
        run_capacity(specs, weights_dir=tmp_path / "w")
    assert not (tmp_path / "w").exists()  # nothing trained
    rows = run_capacity(specs[:2], weights_dir=tmp_path / "w")
    assert rows[0]["weights"] and rows[1]["weights"] and rows[0]["weights"] != rows[1]["weights"]


FAMILY_FILE = """
from sketchsim.sketch.family import FamilyType, HardFamily

def build(q, s, seed, params):
    return HardFamily(q, s, seed + SHIFT)

SHIFT = {shift}
MINE = FamilyType("mine", "F(q,s) with a shifted seed", build)
"""


def test_sweep_resume_trains_again_after_the_family_file_changed(tmp_path):
    """A family plug-in edited under the same name builds other tokens: not resumed."""
    fam = tmp_path / "myfam.py"
    fam.write_text(FAMILY_FILE.format(shift=0))
    out = tmp_path / "s.json"
    spec = CapacitySpec(f"{fam}:MINE", 3, 1, "kernel", 1, 1, 1, 2, "elu1", 0, steps=5)
    first = run_capacity([spec], path=out)[0]
    assert run_capacity([spec], path=out, resume=True)[0] == first  # unchanged: resumed
    fam.write_text(FAMILY_FILE.format(shift=3))
    edited = run_capacity([spec], path=out, resume=True)[0]
    assert edited["family_identity"] != first["family_identity"]
    assert edited["seconds"] != first["seconds"]
