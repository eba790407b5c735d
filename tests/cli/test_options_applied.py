"""Every option applies or is refused in one line, before anything trains or is measured, and
the recorded parameters are those applied (issue #60, cases 3 and 5)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from sketchsim.cli import main
from sketchsim.errors import SketchsimError
from sketchsim.experiments.plan import default_plan

#: A tiny capacity sweep (the options under test are added to it).
SWEEP = ["sweep", "--suite", "capacity", "--q", "2", "--s", "1", "--seeds", "1", "--steps", "1"]


@pytest.fixture
def no_training(monkeypatch):
    """A refusal comes before any run: the sweep itself must not be reached."""
    pytest.importorskip("torch", reason="the torch extra is not installed")
    import sketchsim.api

    def trained(*args, **kwargs):
        raise AssertionError("the sweep ran: the option was not refused first")

    monkeypatch.setattr(sketchsim.api, "sweep", trained)


def _refused(args: list[str], tmp_path, needle: str) -> str:
    """Run ``args`` with --json and --save-weights into ``tmp_path``: exit 2, one line holding
    ``needle``, no traceback, nothing written."""
    out, weights = tmp_path / "s.json", tmp_path / "w"
    res = CliRunner().invoke(main, [*args, "--json", str(out), "--save-weights", str(weights)])
    crashed = res.exception is not None and not isinstance(res.exception, SystemExit)
    assert not crashed, repr(res.exception)
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert res.exit_code == 2 and len(lines) == 1, (res.exit_code, res.output)
    assert lines[0].startswith("error: ") and needle in lines[0], res.output
    assert not out.exists() and not weights.exists()
    return lines[0]


# --- case 1: --batch with no batchable run ----------------------------------------------


@pytest.mark.parametrize(
    "extra",
    [
        ["--model", "kernel", "--layers", "1"],  # the first example
        ["--arch", "linear", "--train-bits", "4", "--layers", "1"],  # its second
        ["--arch", "softmax"],
        ["--arch", "gla", "--weight-l1", "0.001", "--layers", "1"],
        ["--arch", "gla", "--train-noise", "4", "--layers", "1"],
    ],
    ids=lambda x: " ".join(x),
)
def test_batch_with_no_batchable_run_is_refused(tmp_path, no_training, extra):
    line = _refused([*SWEEP, *extra, "--batch"], tmp_path, "--batch trains the causal --arch")
    assert "no run of this plan is one, so it would batch nothing" in line


def test_batch_is_recorded_when_a_run_batches():
    plan = default_plan("capacity").with_(models=(), archs=("gla",), layer_counts=(1,), batch=True)
    assert plan.batchable() and plan.header()["batch"] is True
    mixed = plan.with_(models=("kernel",))  # the kernel runs train alone, gla batches
    assert mixed.header()["batch"] is True


@pytest.mark.parametrize(
    "overrides",
    [
        {"archs": ("gla",)},
        {"archs": ("gla", "softmax"), "models": ("kernel",)},
        {"archs": ("linear",), "train_bits": 4},
        {"archs": ("deltanet",), "weight_l1": 0.01},
        {"archs": ("deltanet",), "rebase_at": 1},
        {"archs": ("softmax",)},
        {"models": ("kernel", "signed")},
    ],
    ids=str,
)
def test_the_plans_batch_rule_is_the_runs(overrides):
    """SuitePlan.batchable says whether any run of the plan is capacity_suite.batchable."""
    pytest.importorskip("torch", reason="the torch extra is not installed")
    from sketchsim.experiments.capacity_suite import batchable
    from sketchsim.experiments.suite_runs import capacity_specs

    base = {"models": (), "qs": (2,), "ss": (1,), "layer_counts": (1,), "seeds": 1}
    plan = default_plan("capacity").with_(**{**base, **overrides})
    assert plan.batchable() == any(batchable(s) for s in capacity_specs(plan))


# --- case 2: --train-bits with only the softmax reference --------------------------------


@pytest.mark.parametrize("model", [["--arch", "softmax"], ["--model", "softmax"]], ids=str)
def test_train_bits_with_only_the_softmax_reference_is_refused(tmp_path, no_training, model):
    _refused([*SWEEP, *model, "--train-bits", "4"], tmp_path,
             "--train-bits trains a model's state in K-bit registers, and the softmax "
             "reference has no fixed-size state")  # fmt: skip


def test_train_bits_beside_a_model_with_a_state_applies_to_it():
    pytest.importorskip("torch", reason="the torch extra is not installed")
    from sketchsim.experiments.suite_runs import capacity_specs

    plan = default_plan("capacity").with_(models=("kernel", "softmax"), train_bits=4, seeds=1)
    bits = {s.model: s.train_bits for s in capacity_specs(plan)}
    assert bits == {"kernel": 4, "softmax": 0} and plan.header()["train_bits"] == 4


# --- case 3: --layers with only the softmax reference ------------------------------------


@pytest.mark.parametrize("model", [["--arch", "softmax"], ["--model", "softmax"]], ids=str)
def test_layers_with_only_the_softmax_reference_are_refused(tmp_path, no_training, model):
    _refused([*SWEEP, *model, "--layers", "1,2"], tmp_path,
             "--layers: the softmax reference trains at the smallest layer count only")  # fmt: skip


def test_a_softmax_plan_records_the_layers_it_trains():
    """The default layer grid (1, 2) narrows to the one layer count softmax trains at; one
    count given applies (L2); beside a model with a state the grid is that model's."""
    pytest.importorskip("torch", reason="the torch extra is not installed")
    from sketchsim.experiments.suite_runs import capacity_specs

    capacity = default_plan("capacity")
    assert capacity.layer_counts == (1, 2)
    for plan, want in (
        (capacity.with_(models=("softmax",)), [1]),
        (capacity.with_(models=(), archs=("softmax",)), [1]),
        (capacity.with_(models=("softmax",), layer_counts=(2,)), [2]),
        (capacity.with_(models=("kernel", "softmax")), [1, 2]),
    ):
        assert plan.header()["layers"] == want
        assert sorted({s.layers for s in capacity_specs(plan)}) == want
    with pytest.raises(SketchsimError, match="softmax reference trains at the smallest"):
        capacity.with_(models=("softmax",), layer_counts=(1, 2))


# --- case 4: capacity --rounding cut on a folder with no causal file ---------------------


@pytest.fixture(scope="module")
def kernel_folder(tmp_path_factory):
    from weights_files import random_weights

    from sketchsim.sketch.family import HardFamily

    folder = tmp_path_factory.mktemp("kernel-weights")
    for seed in range(2):
        random_weights(folder / f"k{seed}.npz", HardFamily(2, 1), 1, 1, 1, 2, "elu1", seed=seed)
    (folder / "zz-broken.npz").write_bytes(b"not a weights file")  # not causal either
    return folder


def test_capacity_rounding_cut_on_kernel_files_is_refused(kernel_folder, tmp_path, monkeypatch):
    import sketchsim.runs.capacity as capacity

    def measured(*args, **kwargs):
        raise AssertionError("a file was measured: --rounding cut was not refused first")

    monkeypatch.setattr(capacity, "measure_file", measured)
    out = tmp_path / "c.json"
    res = CliRunner().invoke(main, ["capacity", str(kernel_folder), "--rounding", "cut",
                                    "--json", str(out)])  # fmt: skip
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert res.exit_code == 2 and len(lines) == 1, res.output
    assert lines[0].startswith("error: --rounding cut rounds a causal model's state at the cut")
    assert "none of the 3 weights files" in lines[0] and "holds a causal model" in lines[0]
    assert not out.exists()


def test_capacity_rounding_cut_on_a_mixed_folder_records_where_it_applies(
    kernel_folder, tmp_path, monkeypatch
):
    import shutil

    from weights_files import random_causal_weights

    import sketchsim.runs.capacity as capacity
    from sketchsim.sketch.family import HardFamily

    folder = tmp_path / "mixed"
    shutil.copytree(kernel_folder, folder)
    random_causal_weights(folder / "c.npz", HardFamily(2, 1), "deltanet", 1, 1, 1, 2)
    calls = []

    def measured(path, samples, rounding="every", prove=None):  # the engine is not tested here
        calls.append((path.name, rounding))
        return {"unreadable": {"weights": path.name, "reason": "not measured in this test"}}

    monkeypatch.setattr(capacity, "measure_file", measured)
    out = tmp_path / "c.json"
    capacity.capacity_dir(folder, 8, references=False, json_path=out, rounding="cut")
    params = json.loads(out.read_text())["parameters"]
    assert params["rounding"] == "cut" and params["rounding_applies_to"] == "causal files"
    assert params["causal_files"] == 1
    assert sorted(calls) == [(n, "cut") for n in ("c.npz", "k0.npz", "k1.npz", "zz-broken.npz")]
    # every file causal: the plain record, as before
    only = tmp_path / "only"
    only.mkdir()
    shutil.copy(folder / "c.npz", only / "c.npz")
    capacity.capacity_dir(only, 8, references=False, json_path=out, rounding="cut")
    params = json.loads(out.read_text())["parameters"]
    assert params["rounding"] == "cut" and "rounding_applies_to" not in params


# --- case 5: --train-rounding and --train-bits-from without --train-bits -----------------


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--train-rounding", "every"], "--train-rounding applies only with --train-bits K"),
        (["--train-bits-from", "start"], "--train-bits-from applies only with --train-bits K"),
        (["--train-bits-from", "fit"], "--train-bits-from applies only with --train-bits K"),
        (["--train-rounding", "cut"], "--train-rounding cut trains one-layer causal"),
    ],
    ids=lambda x: " ".join(x) if isinstance(x, list) else "",
)
def test_training_at_k_bits_options_without_train_bits_are_refused(
    tmp_path, no_training, extra, needle
):
    _refused([*SWEEP, "--arch", "deltanet", "--layers", "1", *extra], tmp_path, needle)


def test_the_suite_refusal_comes_first_outside_the_capacity_suite(tmp_path, no_training):
    _refused(["sweep", "--steps", "1", "--train-rounding", "every"], tmp_path,
             "--train-rounding applies only with --suite capacity")  # fmt: skip


# --- issue case 3: a family, model or plug-in given twice trains once --------------------


@pytest.mark.parametrize(
    ("extra", "field", "want"),
    [
        (["--family", "hard,hard", "--model", "kernel"], "families", ("hard",)),
        (["--family", "mqar,hard,mqar", "--model", "kernel"], "families", ("mqar", "hard")),
        (["--arch", "gla,gla"], "archs", ("gla",)),
        (["--model", "kernel", "--model", "kernel"], "models", ("kernel",)),
    ],
    ids=lambda x: " ".join(x) if isinstance(x, list) else "",
)
def test_a_repeated_family_model_or_arch_trains_once(monkeypatch, extra, field, want):
    pytest.importorskip("torch", reason="the torch extra is not installed")
    import sketchsim.api

    seen = {}

    def sweep(plan, *args, **kwargs):  # the plan the sweep would run; nothing trains
        seen["plan"] = plan
        raise SketchsimError("stopped before training")

    monkeypatch.setattr(sketchsim.api, "sweep", sweep)
    res = CliRunner().invoke(main, [*SWEEP, "--layers", "1", *extra])
    assert res.exit_code == 2 and "stopped before training" in res.output, res.output
    assert getattr(seen["plan"], field) == want
    assert seen["plan"].header()[field] == list(want)


@pytest.mark.parametrize(
    ("overrides", "needle"),
    [
        ({"families": ("hard", "hard")}, "family lists 'hard' twice"),
        ({"models": (), "archs": ("gla", "gla")}, "arch lists 'gla' twice"),
        ({"models": ("kernel", "kernel")}, "model lists 'kernel' twice"),
    ],
    ids=str,
)
def test_the_library_plan_refuses_a_repeated_run(overrides, needle):
    with pytest.raises(SketchsimError, match=needle):
        default_plan("capacity").with_(**overrides)
