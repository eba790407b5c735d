"""User layers (entry points ``sketchsim.models``, ``file.py:NAME``) trained by the capacity
suite and run by the engine: the documented example, found both ways."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from cliutil import assert_error_line
from fake_entry_points import FakeEntryPoint

from sketchsim.cli import main
from sketchsim.errors import PluginError
from sketchsim.experiments import model_plugins
from sketchsim.experiments.capacity import measure_weights, weights_family
from sketchsim.experiments.capacity_models import model_from_weights
from sketchsim.experiments.model_plugins import ModelType, resolve_model
from sketchsim.minip.bits import unpack_bits
from sketchsim.sketch import specs
from sketchsim.sketch.engine import Engine
from sketchsim.sketch.trained import load_weights, trained_plan

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "capacity" / "tied_layer.py"


def test_the_documented_layer_trains_saves_and_runs_in_the_engine(tmp_path):
    plugin = tmp_path / "tied_layer.py"
    shutil.copy(EXAMPLE, plugin)
    out, wdir = tmp_path / "s.json", tmp_path / "w"
    argv = ["sweep", "--suite", "capacity", "--q", "3", "--s", "1", "--seeds", "1",
            "--steps", "200", "--layers", "1", "--model", "softmax", "--model-plugin",
            f"{plugin}:tied", "--json", str(out), "--save-weights", str(wdir)]  # fmt: skip
    res = CliRunner().invoke(main, argv)
    assert res.exit_code == 0, res.output
    runs = json.loads(out.read_text())["runs"]
    tied = [r for r in runs if r["architecture"].startswith("tied ")]
    assert len(tied) == 1 and tied[0]["weights"]
    path = wdir / tied[0]["weights"]  # the file's name inside the --save-weights folder
    w = load_weights(path)
    # tied: the exported query features are the key features
    assert np.array_equal(w.arrays["L0.H0.wq"], w.arrays["L0.H0.wk"])
    fam = weights_family(w)
    T = fam.all_answers()
    ctx = fam.context()
    ans = Engine(trained_plan(ctx, w, 32), ctx).run(fam.tokens(T)).answers
    x = torch.tensor(unpack_bits(fam.tokens(T), fam.m), dtype=torch.float64)
    with torch.no_grad():
        y = model_from_weights(w)(x)[:, : fam.q].numpy()
    assert np.array_equal(ans, np.clip(np.floor(y + 0.5), -1, fam.s + 1))
    row = measure_weights(path)
    assert row["architecture"] == tied[0]["architecture"] and row["bound_bits"] == 3.0


def test_entry_point_and_file_specs_resolve(monkeypatch):
    layer = resolve_model(f"{EXAMPLE}:tied")
    assert layer.__name__ == "TiedLayer"
    model = ModelType("mine", "test", layer)
    eps = [FakeEntryPoint("mine", "pkg.m:MODEL", model),
           FakeEntryPoint("junk", "pkg.j:X", 42)]  # fmt: skip
    monkeypatch.setattr(specs, "entry_points", lambda group: eps)
    assert resolve_model("mine") is layer
    with pytest.raises(PluginError, match="model junk .*not a sketchsim ModelType"):
        resolve_model("junk")
    with pytest.raises(PluginError, match="unknown model 'nope'"):
        resolve_model("nope")
    assert {d.name for d in model_plugins.discover_models()} == {"mine", "junk"}


def test_a_layer_without_state_methods_is_refused(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(
        "from torch import nn\nfrom sketchsim.experiments.model_plugins import ModelType\n"
        "class L(nn.Module):\n    pass\nMODEL = ModelType('bad', 'no state', L)\n"
    )
    argv = ["sweep", "--suite", "capacity", "--q", "2", "--s", "1", "--seeds", "1",
            "--model-plugin", f"{bad}:bad"]  # fmt: skip
    assert_error_line(CliRunner().invoke(main, argv), "its layer lacks contributions, read",
                      only_line=False)  # fmt: skip
