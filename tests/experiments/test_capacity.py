"""The capacity suite and ``sketchsim capacity``: trained models run as sketches.

- at 32 bits per register the engine answers what the torch model rounds to, on
  every input tried (exhaustive and sampled families, trained and untrained models);
- the smallest K is the smallest: the engine is wrong below it and right at it;
- the theorem guard rejects a broken quantizer that leaks past the channel.
"""

import json

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from cliutil import assert_error_line

from sketchsim.cli import main
from sketchsim.errors import SketchsimError
from sketchsim.experiments.capacity_models import (
    CapacityModel,
    calibrate,
    export_arrays,
    model_from_weights,
)
from sketchsim.experiments.capacity_suite import CapacitySpec, train_capacity
from sketchsim.experiments.plan import default_plan
from sketchsim.experiments.suite_runs import capacity_specs
from sketchsim.minip.bits import unpack_bits
from sketchsim.runs.capacity import measure_weights, theorem_guard
from sketchsim.sketch import Protocol
from sketchsim.sketch.family import HardFamily
from sketchsim.sketch.plugins import resolve
from sketchsim.sketch.trained import load_weights, save_weights_file, trained_engine, trained_plan
from sketchsim.sketch.weights_file import weights_family

torch.set_num_threads(1)


def engine_answers(w, fam, T, bits):
    ctx = fam.context()
    eng = trained_engine(ctx, w, bits)
    return eng.run(fam.variable_tokens(T), fixed=fam.fixed_tokens()).answers


def torch_rounded(model, fam, T):
    x = torch.tensor(unpack_bits(fam.tokens(T), fam.m), dtype=torch.float64)
    with torch.no_grad():
        y = model.double()(x)[:, : fam.q].numpy()
    return np.clip(np.floor(y + 0.5), -1, fam.s + 1).astype(np.int64)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """Two trained models of F(4, 1) and one of MQAR, saved by the suite."""
    folder = tmp_path_factory.mktemp("weights")
    rows = [
        train_capacity(
            CapacitySpec("hard", 4, 1, "kernel", 1, 1, 1, 8, "elu1", 0, steps=300), save_to=folder
        ),
        train_capacity(
            CapacitySpec("hard", 4, 1, "signed", 2, 2, 1, 4, "signed", 1, steps=300), save_to=folder
        ),
        train_capacity(
            CapacitySpec("mqar", 2, 1, "kernel", 1, 1, 2, 4, "relu", 0, steps=300), save_to=folder
        ),
    ]
    for row in rows:  # rows name the file inside the --save-weights folder
        row["weights"] = str(folder / row["weights"])
    return folder, rows


def test_engine_at_32_bits_equals_trained_torch_models_on_every_input(trained):
    folder, rows = trained
    for row in rows:
        w = load_weights(row["weights"])
        fam = weights_family(w)
        T = fam.all_answers()
        model = model_from_weights(w)
        assert np.array_equal(engine_answers(w, fam, T, 32), torch_rounded(model, fam, T))
    assert rows[0]["accuracy"] == 1.0 and rows[0]["eval_mode"] == "exhaustive"


@pytest.mark.parametrize("fmap", ["elu1", "relu", "signed"])
@pytest.mark.parametrize("layers, heads", [(1, 3), (2, 2)])
def test_engine_at_32_bits_equals_torch_exhaustive_and_sampled(tmp_path, fmap, layers, heads):
    for fam, n in ((HardFamily(3, 3, seed=2), None), (HardFamily(16, 3, seed=0), 2000)):
        torch.manual_seed(layers * 10 + heads)
        model = CapacityModel(fam.m, layers, heads, 2, 3, fmap).double()
        # calibrated on other inputs of the family than the ones tried (sampled case)
        calib = (
            fam.all_answers()
            if n is None
            else np.random.default_rng(1).integers(0, fam.s + 1, (1 << 14, fam.q))
        )
        x = torch.tensor(unpack_bits(fam.tokens(calib), fam.m), dtype=torch.float64)
        arrays = export_arrays(model, calibrate(model, x))
        header = {
            "architecture": model.arch,
            "family": {"name": "hard", "q": fam.q, "s": fam.s, "seed": fam.seed},
        }
        w = load_weights(save_weights_file(tmp_path / "w.npz", header, arrays))
        T = fam.all_answers() if n is None else fam.sample_answers(n)
        assert np.array_equal(engine_answers(w, fam, T, 32), torch_rounded(model, fam, T))


def test_smallest_bits_is_the_smallest_and_the_ratio_its_transcript(trained):
    folder, rows = trained
    row = measure_weights(rows[0]["weights"])
    w = load_weights(rows[0]["weights"])
    fam = weights_family(w)
    T = fam.all_answers()
    K = row["bits_per_coordinate"]
    assert K is not None and row["mode"] == "exhaustive" and row["inputs"] == 16
    assert (engine_answers(w, fam, T, K) == T).all()
    for below in range(1, K):
        assert not (engine_answers(w, fam, T, below) == T).all()
    E = w.entries()
    assert row["transcript_bits"] == w.arch["layers"] * w.arch["heads"] * E * K
    assert row["ratio"] == pytest.approx(row["transcript_bits"] / 4.0)
    # the theorem, measured: decoded on every input, so its transcripts carry the bound
    assert row["decoded"] is True and row["log2_distinct"] >= 4.0 - 1e-9
    assert row["used_bits"] >= row["entry_entropy_bits"] >= 4.0 - 1e-9
    assert [p["bits"] for p in row["curve"]] == list(range(1, 33))
    assert row["curve"][K - 1]["accuracy"] == 1.0


def _leaky_protocol(path):
    """A broken quantizer: every register reads 0 on the channel, the exact sums leak
    to the readers through a Python buffer beside it."""
    w = load_weights(path)
    leak = {}

    def setup(ctx, params):
        real = trained_plan(ctx, w, 32)
        emit, update, answer = (f.py_func for f in (real.emit, real.update, real.answer))
        k = real.layers[0].symbols

        def leaky_emit(layer, pos, bits, c, state, aux, out):
            buf = np.zeros(k, dtype=np.int64)
            emit(layer, pos, bits, c, state, aux, buf)
            if pos == 0:
                leak[layer] = np.zeros(k, dtype=np.int64)
            leak[layer] += buf  # the exact register, never on the channel

        def leaky_update(layer, pos, bits, c, state, sketch, aux):
            update(layer, pos, bits, c, state, np.minimum(leak[layer], 2**32 - 1), aux)

        real.emit, real.update, real.answer = leaky_emit, leaky_update, answer
        return real

    return Protocol("leaky", "a broken quantizer", setup, params=resolve("trained").protocol.params)


def test_theorem_guard_rejects_a_broken_quantizer(trained):
    folder, rows = trained
    with pytest.raises(SketchsimError, match="bug in sketchsim"):
        measure_weights(rows[0]["weights"], protocol=_leaky_protocol(rows[0]["weights"]))
    row = {
        "mode": "exhaustive",
        "decoded": True,
        "used_bits": 3.0,
        "log2_distinct": 4.0,
        "bound_bits": 4.0,
    }
    with pytest.raises(SketchsimError, match="used bits 3.00 < the bound 4.00"):
        theorem_guard(row)
    theorem_guard({**row, "mode": "sampled"})  # a sample proves nothing: no guard
    theorem_guard({**row, "decoded": False})


@pytest.mark.slow
def test_capacity_command_json_and_plot(trained, tmp_path):
    folder, rows = trained
    out, png = tmp_path / "cap.json", tmp_path / "cap.png"
    res = CliRunner().invoke(
        main, ["capacity", str(folder), "--json", str(out), "--plot", str(png)]
    )
    assert res.exit_code == 0, res.output
    data = json.loads(out.read_text())
    keys = {
        "weights",
        "architecture",
        "q",
        "s",
        "bits_per_coordinate",
        "transcript_bits",
        "used_bits",
        "bound_bits",
        "ratio",
        "mode",
        "correct_fraction",
    }
    assert len(data["rows"]) == 3 and all(keys <= set(r) for r in data["rows"])
    assert {s["architecture"] for s in data["summary"]} == {r["architecture"] for r in rows}
    block = [r for r in data["references"] if r["protocol"] == "block-counts"]
    assert block and block[0]["ratio"] == 1.0 and block[0]["correct_fraction"] == 1.0
    assert png.stat().st_size > 0 and data["versions"]["sketchsim"]


def test_capacity_command_hostile_folders(tmp_path):
    runner = CliRunner()
    assert_error_line(runner.invoke(main, ["capacity", str(tmp_path)]), "holds no weights files")
    assert_error_line(runner.invoke(main, ["capacity", str(tmp_path / "no")]), "is not a folder")
    (tmp_path / "bad.npz").write_bytes(b"not an npz")
    res = runner.invoke(main, ["capacity", str(tmp_path)])
    assert_error_line(res, "none of the 1 weights files in")
    assert "could be measured: bad.npz: " in res.output and "not a readable .npz" in res.output


def test_default_plan_and_sweep_command(tmp_path):
    plan = default_plan("capacity")
    specs = capacity_specs(plan)
    assert {(s.q, s.s) for s in specs} == {(q, s) for q in (4, 8, 16) for s in (1, 3)}
    assert {s.model for s in specs} == {"kernel", "signed", "softmax"}
    out, wdir = tmp_path / "sweep.json", tmp_path / "w"
    argv = [
        "sweep",
        "--suite",
        "capacity",
        "--q",
        "3",
        "--s",
        "1",
        "--seeds",
        "3",
        "--steps",
        "40",
        "--layers",
        "1",
        "--heads",
        "1,2",
        "--model",
        "kernel",
        "--model",
        "softmax",
        "--json",
        str(out),
        "--save-weights",
        str(wdir),
    ]
    res = CliRunner().invoke(main, argv)
    assert res.exit_code == 0, res.output
    data = json.loads(out.read_text())
    assert len(data["runs"]) == 12 and data["complete"]
    summary = {s["architecture"]: s for s in data["summary"]}
    assert set(summary) == {
        "elu1 L1 H1 r1 d16",
        "elu1 L1 H2 r1 d16",
        "softmax L1 H1 d16",
        "softmax L1 H2 d16",
    }
    assert all(s["seeds"] == 3 and s["ci_low"] is not None for s in summary.values())
    assert len(list(wdir.glob("*.npz"))) == 6  # kernel models only
    res = CliRunner().invoke(main, [*argv, "--resume"])
    assert res.exit_code == 0 and json.loads(out.read_text())["runs"] == data["runs"]


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--suite", "capacity", "--q", "0"], "--q must list integers >= 1"),
        (["--suite", "capacity", "--q", "2", "--heads", "0"], "heads must list integers in 1..64"),
        (["--suite", "capacity", "--q", "2", "--layers", "9"], "layers must list integers in 1..8"),
        (["--suite", "capacity", "--feature-map", "favor"], "must list names from elu1, relu"),
        (["--suite", "capacity", "--family", "nope"], "unknown family 'nope'"),
        (["--suite", "witness", "--heads", "1,2"], "--heads takes one number outside the capacity"),
    ],
)
def test_capacity_sweep_bad_input_is_one_line(args, needle):
    assert_error_line(CliRunner().invoke(main, ["sweep", *args]), needle, only_line=False)


def test_capacity_command_refuses_zero_samples(tmp_path):
    res = CliRunner().invoke(main, ["capacity", str(tmp_path), "--samples", "0"])
    assert res.exit_code == 2 and "Traceback" not in res.output


def test_sampled_family_reports_the_sample_and_null_bits_when_nothing_decodes(tmp_path):
    fam = HardFamily(16, 3, seed=0)  # 2^32 inputs: sampled
    torch.manual_seed(0)
    model = CapacityModel(fam.m, 1, 1, 1, 2, "elu1").double()  # untrained: never right
    x = torch.tensor(unpack_bits(fam.tokens(fam.sample_answers(64)), fam.m), dtype=torch.float64)
    header = {"architecture": model.arch,
              "family": {"name": "hard", "q": 16, "s": 3, "seed": 0}}  # fmt: skip
    path = save_weights_file(tmp_path / "w.npz", header, export_arrays(model, calibrate(model, x)))
    row = measure_weights(path, samples=500)
    assert row["mode"] == "sampled" and row["inputs"] == 500
    assert row["bits_per_coordinate"] is None
    assert row["transcript_bits"] is None and row["ratio"] is None
    assert row["measured_at_bits"] == 32 and row["correct_fraction"] < 1
    assert row["bound_bits"] == 32.0 and len(row["curve"]) == 32


def test_the_search_runs_all_inputs_only_where_the_curve_and_the_witnesses_pass(
    tmp_path, monkeypatch
):
    """A K is measured on the whole sample only when the curve's inputs and every input
    found wrong at an earlier K are right; a witness still wrong skips the run (its
    failure is the whole set's), and the measurement at the smallest K is reused."""
    import dataclasses

    import sketchsim.runs.capacity as capacity
    import sketchsim.sketch.measure as measure_mod
    from sketchsim.sketch.measure import choose_answers

    fam = HardFamily(16, 3, seed=0)  # 2^32 inputs: sampled
    torch.manual_seed(0)
    model = CapacityModel(fam.m, 1, 1, 1, 2, "elu1").double()
    x = torch.tensor(unpack_bits(fam.tokens(fam.sample_answers(64)), fam.m), dtype=torch.float64)
    header = {"architecture": model.arch, "family": {"name": "hard", "q": 16, "s": 3, "seed": 0}}
    path = save_weights_file(tmp_path / "w.npz", header, export_arrays(model, calibrate(model, x)))
    samples = 5000
    _, T = choose_answers(fam, None, samples)
    rows = {fam.variable_tokens(T[i : i + 1]).tobytes(): i for i in range(samples)}
    witness = 4500  # beyond the curve's 4,096 inputs
    # the fake model: right on the curve from K = 2; input 4500 wrong below K = 5;
    # the whole sample wrong below K = 6 (its first failure: input 4500)
    engine_calls, measured = [], []

    def fake_answers(protocol, params, family, tokens, fixed):
        K = params["bits"]
        idx = [rows[tokens[i : i + 1].tobytes()] for i in range(tokens.shape[0])]
        engine_calls.append((K, len(idx)))
        ans = T[idx].astype(np.int64)
        if K < 2:
            ans[:] = -1
        if K < 5:
            ans[[j for j, i in enumerate(idx) if i == witness]] = -1
        return ans

    real_measure = measure_mod.measure

    def fake_measure(family, T_, protocol, params, **kw):
        measured.append(params["bits"])
        rep = real_measure(family, T_[:64], protocol, params, **kw)
        wrong = 0 if params["bits"] >= 6 else 1
        return dataclasses.replace(rep, wrong_inputs=wrong,
                                   first_failure={"input": witness} if wrong else None)  # fmt: skip

    monkeypatch.setattr(capacity, "_engine_answers", fake_answers)
    monkeypatch.setattr(measure_mod, "measure", fake_measure)
    row = measure_weights(path, samples=samples)
    assert measured == [2, 5, 6]  # K = 3, 4: the witness is still wrong, no run
    assert row["bits_per_coordinate"] == 6 and row["measured_at_bits"] == 6
    assert [K for K, n in engine_calls if n == 1] == [3, 4, 5, 6]
    assert [p["accuracy"] for p in row["curve"][:2]] == [0.0, 1.0]
