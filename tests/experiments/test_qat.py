"""Quantization-aware training for the capacity suite (#45): the K-bit state in the forward
pass is the engine's fixed point, and rows say which models were trained at K."""

import json

import naive
import numpy as np
import pytest
import torch
from click.testing import CliRunner
from cliutil import assert_error_line
from weights_files import random_weights

from sketchsim.cli import main
from sketchsim.experiments.capacity_models import (
    fixed_point_state,
    model_from_weights,
    qat_quantizer,
)
from sketchsim.minip.bits import unpack_bits
from sketchsim.runs.capacity import measure_weights
from sketchsim.sketch.family import HardFamily
from sketchsim.sketch.weights_file import load_weights

torch.set_num_threads(1)


@pytest.mark.parametrize("bits", [1, 2, 3, 5, 8, 32])
@pytest.mark.parametrize("fmap, layers, r", [("elu1", 1, 2), ("signed", 2, 1), ("relu", 2, 2)])
def test_the_fixed_point_state_is_the_engines(tmp_path, bits, fmap, layers, r):
    """The torch forward through fixed_point_state with the file's lo and span equals the
    NumPy reference of the engine's fixed point (tests/naive.py) at every K."""
    fam = HardFamily(3, 2)
    w = random_weights(tmp_path / "w.npz", fam, layers, 2, r, 3, fmap, seed=bits)
    T = fam.all_answers()
    X = unpack_bits(fam.tokens(T), fam.m)
    cal = [
        np.stack([w.arrays[f"L{lay}.H{h}.{k}"] for h in range(2)]) for lay in range(layers)
        for k in ("lo", "span")
    ]  # fmt: skip
    model = model_from_weights(w)

    def quantize(layer, c):
        lo, span = (torch.from_numpy(cal[2 * layer + i]) for i in (0, 1))
        return fixed_point_state(c, bits, lo, span)

    with torch.no_grad():
        y = model(torch.from_numpy(X.astype(np.float64)), quantize=quantize).numpy()
    want = naive.trained_outputs(w, X, bits=bits)
    assert np.allclose(y, want, rtol=1e-9, atol=1e-9)


def test_qat_reads_the_fixed_point_forward_and_the_exact_gradient():
    c = torch.tensor([[[[0.0, 1.0]], [[0.3, 2.0]], [[0.9, 0.5]]]], requires_grad=True)  # [1,3,1,2]
    state = qat_quantizer(2)(0, c)
    exact = c.detach().sum(1)
    assert not torch.allclose(state.detach(), exact)  # 2 bits: rounded
    state.sum().backward()
    assert torch.equal(c.grad, torch.ones_like(c))  # straight through: d(sum)/dc


def test_a_model_trained_at_k_says_so_in_its_row_file_and_capacity_row(tmp_path, test_device):
    argv = ["sweep", "--suite", "capacity", "--q", "3", "--s", "1", "--seeds", "1",
            "--steps", "60", "--layers", "1", "--ranks", "1", "--value-widths", "2",
            "--model", "kernel", "--train-bits", "3", "--json", str(tmp_path / "s.json"),
            "--save-weights", str(tmp_path / "w")]  # fmt: skip
    res = CliRunner().invoke(main, argv)
    assert res.exit_code == 0, res.output
    data = json.loads((tmp_path / "s.json").read_text())
    (run,) = data["runs"]
    assert data["header"]["train_bits"] == 3 and run["spec"]["train_bits"] == 3
    assert run["trained_at_bits"] == 3 and run["device"] == test_device
    path = tmp_path / "w" / run["weights"]
    assert load_weights(path).header["trained_at_bits"] == 3
    assert measure_weights(path, samples=64)["trained_at_bits"] == 3


def test_train_bits_outside_the_capacity_suite_is_refused():
    res = CliRunner().invoke(main, ["sweep", "--suite", "witness", "--train-bits", "4"])
    assert_error_line(res, "--train-bits applies only with --suite capacity")


@pytest.mark.parametrize("layers", [1, 2])
def test_a_file_trained_at_k_runs_in_the_engine_as_it_was_trained(tmp_path, layers):
    """Review: the file was calibrated on other inputs (and the unquantized forward) than the
    registers it was trained against; now the engine at K reproduces the QAT forward."""
    from sketchsim.experiments.capacity_suite import CapacitySpec, run_capacity
    from sketchsim.sketch.trained import trained_engine

    spec = CapacitySpec("hard", 3, 1, "kernel", layers, 1, 1, 3, "elu1", 0, steps=80,
                        train_bits=3)  # fmt: skip
    (row,) = run_capacity([spec], weights_dir=tmp_path / "w")
    w = load_weights(tmp_path / "w" / row["weights"])
    fam = HardFamily(3, 1)
    T = fam.all_answers()  # the training inputs: every input of F(3, 1)
    ctx = fam.context()
    got = trained_engine(ctx, w, 3).run(fam.tokens(T)).answers
    x = torch.tensor(unpack_bits(fam.tokens(T), fam.m), dtype=torch.float64)
    with torch.no_grad():
        y = model_from_weights(w)(x, quantize=qat_quantizer(3))[:, :3].numpy()
    near_tie = np.abs(y - np.floor(y) - 0.5) < 1e-6
    want = np.clip(np.floor(y + 0.5), -1, 2)
    assert ((got == want) | near_tie).all()
