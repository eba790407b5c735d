"""Runs trained as one batched model (sketchsim.experiments.batched_training) against one
at a time: the same steps, stops, kept steps, accuracies and weights up to float32
rounding; and the sweep's --batch keeps batched and single runs apart."""

import json

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from sketchsim.cli import main
from sketchsim.experiments.batched_training import batch_key, batchable, train_capacity_batch
from sketchsim.experiments.capacity_suite import CapacitySpec, train_capacity
from sketchsim.sketch.trained import load_weights

torch.set_num_threads(1)


def _specs(arch, schedule, keep, pairs, steps=25, q=4, s=3, inputs=64):
    return [CapacitySpec("hard", q, s, "causal", 1, 1, 2, 8, "elu1", seed, steps=steps, lr=lr,
                         arch=arch, schedule=schedule, keep=keep, train_inputs=inputs)
            for seed, lr in pairs]  # fmt: skip


@pytest.mark.parametrize(
    "arch, schedule, keep",
    [("deltanet", "onecycle", "last"), ("linear", "constant", "best"), ("gla", "constant", "last")],
)
def test_a_batch_trains_each_model_as_alone(tmp_path, arch, schedule, keep):
    # F(4,3) has more inputs than the 64 trained on: each seed draws its own
    specs = _specs(arch, schedule, keep, [(0, 0.01), (1, 0.03), (2, 0.003)])
    one = [train_capacity(s, save_to=tmp_path / "one") for s in specs]
    many = train_capacity_batch(specs, save_to=tmp_path / "many")
    for a, b in zip(one, many, strict=True):
        assert b["batched"] == 3
        assert (a["steps"], a["kept_step"], a["train_inputs"]) == (
            b["steps"], b["kept_step"], b["train_inputs"])  # fmt: skip
        assert b["max_abs_error"] == pytest.approx(a["max_abs_error"], rel=1e-4)
        assert abs(a["accuracy"] - b["accuracy"]) <= 2 / a["eval_inputs"]
        wa = load_weights(tmp_path / "one" / a["weights"]).arrays
        wb = load_weights(tmp_path / "many" / b["weights"]).arrays
        for k in wa:
            if k != "header":
                np.testing.assert_allclose(wb[k], wa[k], rtol=1e-3, atol=1e-4, err_msg=k)


def test_a_model_that_stops_is_frozen_while_the_others_train():
    # stop below 5: the diverging rate stops at once (or at non-finite), the others later
    specs = [
        CapacitySpec(
            "hard",
            4,
            1,
            "causal",
            1,
            1,
            2,
            8,
            "elu1",
            seed,
            steps=200,
            lr=lr,
            arch="deltanet",
            stop_below=0.45,
        )
        for seed, lr in [(0, 0.03), (1, 0.1)]
    ]
    one = [train_capacity(s) for s in specs]
    many = train_capacity_batch(specs)
    assert [r["steps"] for r in one] == [r["steps"] for r in many]
    assert len({r["steps"] for r in one}) == 2  # they stop at different steps
    for a, b in zip(one, many, strict=True):
        assert b["max_abs_error"] == pytest.approx(a["max_abs_error"], rel=1e-3)


def test_only_causal_float_runs_of_one_key_batch():
    a, b = _specs("deltanet", "onecycle", "last", [(0, 0.01), (1, 0.03)])
    assert batch_key(a) == batch_key(b) and batchable(a)
    kernel = CapacitySpec("hard", 4, 1, "kernel", 1, 1, 1, 8, "elu1", 0)
    assert not batchable(kernel)
    assert not batchable(CapacitySpec(**{**a.__dict__, "train_bits": 4}))
    with pytest.raises(ValueError, match="differ only in seed and lr"):
        train_capacity_batch([a, CapacitySpec(**{**b.__dict__, "value_width": 4})])
    with pytest.raises(ValueError):
        train_capacity_batch([kernel])


def test_sweep_batch_rows_resume_only_batched_runs(tmp_path):
    base = ["sweep", "--suite", "capacity", "--arch", "deltanet", "--q", "4", "--s", "1",
            "--layers", "1", "--ranks", "1", "--value-widths", "4", "--seeds", "2",
            "--lr", "0.01,0.03", "--steps", "5"]  # fmt: skip
    path = tmp_path / "b.json"
    res = CliRunner().invoke(main, [*base, "--batch", "--json", str(path)])
    assert res.exit_code == 0, res.output
    data = json.loads(path.read_text())
    causal = [r for r in data["runs"] if r["spec"]["model"] == "causal"]
    assert len(causal) == 4 and all(r["batched"] == 4 for r in causal)
    assert data["header"]["batch"] is True
    # resumed with --batch: every run kept as it was
    res = CliRunner().invoke(main, [*base, "--batch", "--json", str(path), "--resume"])
    assert res.exit_code == 0, res.output
    assert json.loads(path.read_text())["runs"] == data["runs"]
    # without --batch the batched rows are not the runs asked for: trained again, alone
    res = CliRunner().invoke(main, [*base, "--json", str(path), "--resume"])
    assert res.exit_code == 0, res.output
    again = [r for r in json.loads(path.read_text())["runs"] if r["spec"]["model"] == "causal"]
    assert len(again) == 4 and not any("batched" in r for r in again)


def test_the_memory_check_counts_the_models_trained_together():
    from sketchsim.errors import SketchsimError
    from sketchsim.experiments.memory import capacity_memory, check_capacity_memory

    pairs = [(s, lr) for s in range(3) for lr in (0.01, 0.1)]
    specs = _specs("deltanet", "onecycle", "last", pairs)
    one = capacity_memory(specs[0]).peak
    assert check_capacity_memory(specs, available=10 * one) == one
    with pytest.raises(SketchsimError, match=r"\(6 trained together\) needs about"):
        check_capacity_memory(specs, available=2 * one, batch=True)
