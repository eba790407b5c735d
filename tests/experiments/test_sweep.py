"""Sweeps (torch): resume, JSON rows, plots, OOD splits (skipped only without torch)."""

import json

import numpy as np
import pytest
from click.testing import CliRunner

torch = pytest.importorskip("torch", reason="the torch extra is not installed")
torch.set_num_threads(1)

from cliutil import assert_error_line  # noqa: E402

from sketchsim.certify import WitnessFamily, save_family  # noqa: E402
from sketchsim.cli import main  # noqa: E402
from sketchsim.errors import SketchsimError  # noqa: E402
from sketchsim.experiments.suites import ood_splits, parse_scales  # noqa: E402
from sketchsim.experiments.sweep_summary import (  # noqa: E402
    spread,
    summarize,
    transition,
    transition_grows,
)
from sketchsim.minip.kernel import minip_targets  # noqa: E402


@pytest.mark.slow
def test_witness_sweep_json_plot_and_resume(tiny_path, tmp_path):
    out, png = tmp_path / "s.json", tmp_path / "s.png"
    args = [
        "sweep",
        "--family",
        str(tiny_path),
        "--ranks",
        "1,8",
        "--seeds",
        "2",
        "--steps",
        "100",
        "--model",
        "kernel",
        "--json",
        str(out),
        "--plot",
        str(png),
    ]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    data = json.loads(out.read_text())
    assert data["complete"] and len(data["runs"]) == 4
    run = data["runs"][0]
    for key in ("sequence_error", "position_error", "max_abs_error", "steps", "seconds", "device"):
        assert key in run
    assert run["spec"]["seed"] == 0 and data["header"]["certified_rank"] == 2
    assert data["versions"]["torch"] and data["summary"]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # r = 1 cannot be exact on a family certified at r >= 2
    r1 = [r for r in data["runs"] if r["spec"]["rank"] == 1]
    assert all(r["sequence_error"] > 0 for r in r1)
    # resume: mark the finished runs, rerun with one more rank, markers survive
    for r in data["runs"]:
        r["seconds"] = -1.0
    out.write_text(json.dumps(data))
    res = CliRunner().invoke(main, [*args[:4], "1,2,8", *args[5:], "--resume"])
    assert res.exit_code == 0, res.output
    runs = json.loads(out.read_text())["runs"]
    assert len(runs) == 6
    assert all((r["seconds"] == -1.0) == (r["spec"]["rank"] != 2) for r in runs)
    # anything that determines a run is in its key: another lr, eps or dtype reruns it
    for extra in (["--lr", "0.02"], ["--eps", "1e-5"], ["--dtype", "float64"]):
        res = CliRunner().invoke(main, [*args, "--resume", *extra])
        assert res.exit_code == 0, res.output
        assert all(r["seconds"] >= 0 for r in json.loads(out.read_text())["runs"]), extra


def _marked_file(tiny_path, tmp_path):
    out = tmp_path / "m.json"
    args = ["sweep", "--family", str(tiny_path), "--ranks", "1", "--seeds", "1", "--steps", "20"]
    args += ["--model", "kernel", "--json", str(out)]
    assert CliRunner().invoke(main, args).exit_code == 0
    return out, args


@pytest.mark.parametrize(
    "content, needle",
    [
        ("[1, 2, 3]", "not a sweep file"),
        ("null", "not a sweep file"),
        ("{nope", "is not valid JSON"),
        ('{"runs": [], "context": {}, "x": NaN}', "NaN is not JSON"),  # strict, as written
        ('{"runs": []}', "no context"),
        ('{"runs": [1], "context": {}}', "not an object with a spec"),
        ('{"runs": [{"spec": {}}], "context": {}}', "lacks"),
    ],
)
def test_resume_validates_every_entry(tiny_path, tmp_path, content, needle):
    out, args = _marked_file(tiny_path, tmp_path)
    out.write_text(content)
    assert_error_line(CliRunner().invoke(main, [*args, "--resume"]), needle)


def test_resume_refuses_entries_with_wrong_values(tiny_path, tmp_path):
    out, args = _marked_file(tiny_path, tmp_path)
    data = json.loads(out.read_text())
    data["runs"][0]["sequence_error"] = "zero"
    out.write_text(json.dumps(data))
    assert_error_line(CliRunner().invoke(main, [*args, "--resume"]), "not a rate")
    data["runs"][0]["sequence_error"] = 0.0
    del data["runs"][0]["spec"]["lr"]
    out.write_text(json.dumps(data))
    assert_error_line(CliRunner().invoke(main, [*args, "--resume"]), "other fields")


def test_resume_does_not_reuse_runs_of_another_family(tiny_path, tmp_path):
    out, args = _marked_file(tiny_path, tmp_path)
    data = json.loads(out.read_text())
    data["runs"][0]["seconds"] = -1.0
    out.write_text(json.dumps(data))
    other = np.load(tiny_path)
    tokens = other["tokens"][::-1].copy()
    fam = WitnessFamily(tokens, 1, minip_targets(tokens)[:, 0], {})
    fam2 = save_family(fam, tmp_path / "u.npz")
    args2 = [a if a != str(tiny_path) else str(fam2) for a in args]
    assert CliRunner().invoke(main, [*args2, "--resume"]).exit_code == 0
    assert json.loads(out.read_text())["runs"][0]["seconds"] >= 0


def test_infinite_learning_rate_is_refused_and_never_reported_exact(tiny_path, tmp_path):
    # the reported failure: --lr inf gave sequence error 0.000 with max error nan
    res = CliRunner().invoke(main, ["sweep", "--ranks", "1", "--seeds", "1", "--lr", "inf"])
    assert_error_line(res, "finite numbers in (0, 1e6]")
    # and a run whose outputs do go non-finite is wrong, with null (not NaN) in the JSON
    from sketchsim.experiments.suites import Split
    from sketchsim.experiments.sweep import RunSpec, train_one

    tokens = np.load(tiny_path)["tokens"]
    split = Split(tokens, minip_targets(tokens)[:, :1].astype(np.float32), 0)
    spec = RunSpec("witness", "", "kernel", "table", 1, 0, steps=30, lr=float("inf"))
    run = train_one(spec, split)
    assert run.sequence_error == 1.0 and not run.finite
    from dataclasses import asdict

    from sketchsim.results import write_json_atomic

    path = write_json_atomic(tmp_path / "nan.json", asdict(run))
    assert "NaN" not in path.read_text() and "Infinity" not in path.read_text()


def test_ood_splits_are_disjoint_and_seeded():
    tr, te = ood_splits(8, 10, 50, seed=3)
    train_tokens = {t.tobytes() for t in tr.tokens.reshape(-1, 8)}
    test_tokens = {t.tobytes() for t in te.tokens.reshape(-1, 8)}
    assert not train_tokens & test_tokens
    np.testing.assert_array_equal(tr.targets, minip_targets(tr.tokens))
    tr2, _ = ood_splits(8, 10, 50, seed=3)
    np.testing.assert_array_equal(tr.tokens, tr2.tokens)


def test_ood_sweep_command(tmp_path):
    out = tmp_path / "o.json"
    res = CliRunner().invoke(
        main,
        [
            "sweep",
            "--suite",
            "ood",
            "--scales",
            "6:12:60",
            "--ranks",
            "1,4",
            "--seeds",
            "1",
            "--steps",
            "100",
            "--json",
            str(out),
        ],
    )
    assert res.exit_code == 0, res.output
    data = json.loads(out.read_text())
    assert "transition" in data and "6:12:60" in data["transition"]
    assert all(r["test_accuracy"] is not None for r in data["runs"])


def test_transition_and_summary():
    rows = [
        {
            "spec": {"scale": "a", "model": "kernel", "feature_map": "mlp", "rank": r},
            "test_accuracy": acc,
        }
        for r, acc in ((1, 0.1), (2, 0.96), (4, 1.0))
    ]
    summary = summarize(rows, "test_accuracy")
    assert transition(summary, 0.95) == {"a": 2}
    assert transition(summary, 0.999) == {"a": 4}


def test_transition_finds_the_rank_per_scale_and_map():
    """A synthetic summary whose true transition is r = 8, 16, 64 (and none for one map)."""
    rows = []
    for scale, needed in (("8:64:1000", 8), ("12:128:2000", 16), ("16:256:4000", 64)):
        for fmap in ("favor", "mlp"):
            for r in (4, 8, 16, 32, 64, 128):
                for seed, wobble in enumerate((-0.01, 0.01)):
                    acc = (0.97 if r >= needed else 0.5) + wobble if fmap == "favor" else 0.3
                    spec = {"scale": scale, "model": "kernel", "feature_map": fmap, "rank": r}
                    rows.append({"spec": {**spec, "seed": seed}, "test_accuracy": acc})
        rows.append(
            {
                "spec": {"scale": scale, "model": "softmax", "feature_map": "-", "rank": 0},
                "test_accuracy": 1.0,
            }
        )
    found = transition(summarize(rows, "test_accuracy"), 0.95)
    assert transition_grows(found) == ["favor"]
    assert transition_grows({"a": 4, "b": 4, "c": 4}) == []
    assert transition_grows({"a": 4, "b": 8}) == []  # fewer than three scales
    assert transition_grows({"a": 4, "b": 8, "c": 16}) == [""]
    assert found == {
        "8:64:1000 (favor)": 8,
        "8:64:1000 (mlp)": None,
        "12:128:2000 (favor)": 16,
        "12:128:2000 (mlp)": None,
        "16:256:4000 (favor)": 64,
        "16:256:4000 (mlp)": None,
    }


def test_spread_reports_best_over_grid_and_seed_spread():
    rows = [
        {
            "spec": {"scale": "", "model": "kernel", "feature_map": "table", "rank": 4, "lr": lr},
            "sequence_error": err,
        }
        for lr, err in ((0.01, 0.2), (0.01, 0.4), (0.03, 0.0), (0.03, 0.1))
    ]
    (cell,) = spread(rows)
    assert cell["best_lr"] == 0.03 and cell["best"] == pytest.approx(0.05)
    assert cell["std"] == pytest.approx(0.05) and cell["lrs"] == [0.01, 0.03]


def test_empty_family_is_refused(tmp_path):
    empty = np.zeros((0, 3, 6), dtype=np.uint8)
    path = tmp_path / "e.npz"
    np.savez(path, tokens=empty, position=1, targets=np.zeros(0, np.int64), meta="{}")
    res = CliRunner().invoke(main, ["sweep", "--family", str(path), "--seeds", "1"])
    assert_error_line(res, "")


def test_feature_map_list_heads_and_threads_are_recorded(tmp_path):
    out = tmp_path / "o.json"
    args = ["sweep", "--suite", "ood", "--scales", "5:6:40", "--ranks", "2", "--seeds", "1"]
    args += ["--steps", "5", "--feature-map", "mlp,favor", "--heads", "2", "--threads", "1"]
    args += ["--model", "kernel", "--json", str(out)]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    data = json.loads(out.read_text())
    assert {r["spec"]["feature_map"] for r in data["runs"]} == {"mlp", "favor"}
    assert all(r["spec"]["heads"] == 2 for r in data["runs"])
    assert data["header"]["threads"] == 1 and data["header"]["feature_maps"] == ["mlp", "favor"]
    assert set(data["transition"]) == {"5:6:40 (mlp)", "5:6:40 (favor)"}


@pytest.mark.parametrize(
    "text, needle", [("8:4", "m:pool:triples"), ("1:4:10", "m >= 2"), ("", "empty")]
)
def test_parse_scales_errors(text, needle):
    with pytest.raises(SketchsimError, match=needle):
        parse_scales(text)


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--ranks", "0,2"], "integers >= 1"),
        (["--suite", "ood", "--feature-map", "table"], "parametric"),
        (["--feature-map", "nope"], "--feature-map must list"),
        (["--resume"], "--resume needs --json"),
        (["--device", "cuda"], "CUDA is not available"),
        (["--lr", "nan"], "finite numbers in (0, 1e6]"),
        (["--lr", "-1"], "finite numbers in (0, 1e6]"),
        (["--lr", "0.01,x"], "comma-separated numbers"),
        (["--steps", "0"], "--steps must be >= 1"),
        (["--steps", "10000000"], "above the limit"),
        (["--seeds", "-1"], "--seeds must be >= 1"),
        (["--seeds", "100000000"], "--seeds = 100,000,000 is above the limit"),
        (["--ranks", "1000000"], "above the limit 4,096 (a kernel head would have about"),
        (["--ranks", "1e6"], "pass --allow-large to go past it"),
        (["--ranks", "1.5"], "comma-separated integers"),
        (["--suite", "ood", "--scales", "40:100000000:100"], "tokens per pool"),
        (["--heads", "0"], "--heads must be >= 1"),
        (["--threads", "0"], "0 is not in the range 1<=x<=256"),  # as reproduce says it
        (["--eps", "-1"], "--eps must be"),
        (["--eps", "nan"], "--eps must be"),
        (["--accuracy", "0"], "--accuracy must be in (0, 1]"),
        (["--accuracy", "1.5"], "--accuracy must be in (0, 1]"),
        (["--feature-map", "mlp,nope"], "--feature-map must list"),
        (["--suite", "ood", "--scales", "70:4:10"], "m is at most"),
        (["--suite", "ood", "--scales", "8:200:10"], "fewer than"),
        (["--suite", "ood", "--scales", "30:1000:100000000"], "triples per split"),
    ],
)
def test_sweep_bad_input(args, needle):
    if needle.startswith("CUDA") and torch.cuda.is_available():
        args = ["--ranks", "x"]
        needle = "integers"
    res = CliRunner().invoke(main, ["sweep", "--steps", "5", "--seeds", "1", *args])
    assert_error_line(res, needle)


def test_auto_takes_the_device_named_in_the_environment(monkeypatch, test_device):
    from sketchsim.experiments.train import DEVICE_ENV, pick_device

    # the suite hands SKETCHSIM_TEST_DEVICE to every run that asks for "auto" (tests/conftest.py)
    assert str(pick_device("auto")) == test_device
    monkeypatch.setenv(DEVICE_ENV, "cpu")
    assert str(pick_device("auto")) == "cpu"
    assert str(pick_device("cpu")) == "cpu"
    monkeypatch.setenv(DEVICE_ENV, "tpu")
    with pytest.raises(SketchsimError, match="SKETCHSIM_DEVICE='tpu': expected cpu or cuda"):
        pick_device("auto")
    res = CliRunner().invoke(main, ["sweep", "--steps", "5", "--seeds", "1", "--ranks", "1"])
    assert_error_line(res, "SKETCHSIM_DEVICE='tpu'")
