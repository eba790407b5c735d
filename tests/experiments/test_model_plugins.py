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
from sketchsim.experiments.capacity_models import model_from_weights
from sketchsim.experiments.model_plugins import ModelType, resolve_model
from sketchsim.minip.bits import unpack_bits
from sketchsim.runs.capacity import measure_weights
from sketchsim.sketch import specs
from sketchsim.sketch.trained import load_weights, trained_engine
from sketchsim.sketch.weights_file import weights_family

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
    ans = trained_engine(ctx, w, 32).run(fam.tokens(T)).answers
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


# --------------------------------------------- a plug-in's layer is untrusted code (#47)

_LAYER = """
import torch
from torch import nn
from sketchsim.experiments.capacity_models import KernelLayer
from sketchsim.experiments.model_plugins import ModelType

class Layer(KernelLayer):
{body}

MODEL = ModelType("bad", "a test layer", Layer)
"""

#: name -> (the layer's body, the one line it must give)
BROKEN = {
    "init": (
        "def __init__(self, *args):\n    raise RuntimeError('no weights here')",
        "bad.py:bad: __init__ raised RuntimeError: no weights here",
    ),
    "read": (
        "def read(self, u, state):\n    raise ValueError('cannot read')",
        "bad.py:bad: read raised ValueError: cannot read",
    ),
    "contributions": (
        "def contributions(self, u):\n    return [][1]",
        "bad.py:bad: contributions raised IndexError: list index out of range",
    ),
    "entries": (
        "@property\ndef entries(self):\n    raise KeyError('E')",
        "bad.py:bad: entries raised KeyError: 'E'",
    ),
    "contributions-shape": (
        "def contributions(self, u):\n    return super().contributions(u)[..., :-1]",
        "bad.py:bad: contributions returned (4, 3, 1, 16); expected [B, N, H, E] = (4, 3, 1, 17)",
    ),
    "read-y-shape": (
        "def read(self, u, state):\n    y, delta = super().read(u, state)\n"
        "    return y[:, :1], delta",
        "bad.py:bad: read returned y (4, 1) and delta (4, 3, 4); expected (y [B, N], delta "
        "[B, N, m]) = ((4, 3), (4, 3, 4))",
    ),
    "read-delta-shape": (
        "def read(self, u, state):\n    y, delta = super().read(u, state)\n"
        "    return y, delta.sum(-1)",
        "bad.py:bad: read returned y (4, 3) and delta (4, 3); expected",
    ),
    "read-one-tensor": (
        "def read(self, u, state):\n    return super().read(u, state)[0]",
        "bad.py:bad: read returned Tensor; expected (y [B, N], delta [B, N, m])",
    ),
    "not-a-module": (
        "def __new__(cls, *args):\n    return 42",
        "bad.py:bad: its layer class built a int, not a torch nn.Module",
    ),
}


def _broken(tmp_path, name):
    import textwrap

    body, _ = BROKEN[name]
    path = tmp_path / "bad.py"
    path.write_text(_LAYER.format(body=textwrap.indent(body, "    ")))
    return path


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_a_broken_plugin_layer_is_one_line_naming_it(tmp_path, name):
    """F(2, 1): B = 4 inputs of N = 3 tokens of width m = 4; one head, r = 1, d = 16."""
    path = _broken(tmp_path, name)
    argv = ["sweep", "--suite", "capacity", "--q", "2", "--s", "1", "--seeds", "1",
            "--steps", "1", "--layers", "1", "--model", "softmax",
            "--model-plugin", f"{path}:bad"]  # fmt: skip
    res = CliRunner().invoke(main, argv)
    assert_error_line(res, f"error: model plug-in {path.parent}/" + BROKEN[name][1])


def test_the_guards_are_the_models_own(tmp_path):
    """A :class:`CapacityModel` of a plug-in raises PluginError itself; the built-in layer
    is not guarded (no checks on its path)."""
    from sketchsim.experiments.capacity_models import CapacityModel, KernelLayer

    layer = resolve_model(f"{_broken(tmp_path, 'read')}:bad")
    model = CapacityModel(4, 1, 1, 1, 16, "elu1", layer_type=layer)
    assert model.plugin.endswith("bad.py:bad")
    with pytest.raises(PluginError, match=r"^model plug-in .*bad\.py:bad: read raised ValueError"):
        model(torch.zeros(2, 3, 4))
    plain = CapacityModel(4, 1, 1, 1, 16, "elu1")
    assert plain.plugin is None and all(type(x) is KernelLayer for x in plain.layers)
    assert plain(torch.zeros(2, 3, 4)).shape == (2, 3)


def test_a_plugin_head_arrays_of_the_wrong_keys_is_one_line(tmp_path):
    from sketchsim.experiments.capacity_models import CapacityModel, calibrate, export_arrays

    path = tmp_path / "bad.py"
    path.write_text(_LAYER.format(body="    def head_arrays(self, h):\n        return {'w': 1}"))
    model = CapacityModel(4, 1, 1, 1, 16, "elu1", layer_type=resolve_model(f"{path}:bad"))
    cal = calibrate(model, torch.zeros(2, 3, 4))
    with pytest.raises(PluginError, match=r"bad\.py:bad: head_arrays gave w; the weights file "):
        export_arrays(model, cal)
