"""Sweeps (torch): resume, JSON rows, plots, OOD splits (skipped only without torch)."""

import json

import numpy as np
import pytest
from click.testing import CliRunner

torch = pytest.importorskip("torch", reason="the torch extra is not installed")

from cliutil import assert_error_line  # noqa: E402

from sketchsim.certify import Family, save_family  # noqa: E402
from sketchsim.cli import main  # noqa: E402
from sketchsim.errors import SketchsimError  # noqa: E402
from sketchsim.experiments.suites import ood_splits, parse_scales  # noqa: E402
from sketchsim.experiments.sweep import summarize, transition  # noqa: E402
from sketchsim.minip import minip_targets  # noqa: E402

C1, C2 = [1, 1, 1, 0, 0, 0], [0, 0, 0, 1, 1, 1]


@pytest.fixture
def tiny_path(tmp_path):
    t = []
    for x, c, d in ((C2, C1, C2), (C1, C2, C1)):
        t += [(x, c, c), (x, d, d), (x, c, d), (x, d, c)]
    tokens = np.array(t, dtype=np.uint8)
    return save_family(Family(tokens, 1, minip_targets(tokens)[:, 0], {}), tmp_path / "t.npz")


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
        "300",
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
    res = CliRunner().invoke(main, [*args[:4], "1,8,2", *args[5:], "--resume"])
    assert res.exit_code == 2 and "other settings" in res.output  # ranks changed
    res = CliRunner().invoke(main, [*args, "--resume"])
    assert res.exit_code == 0, res.output
    assert all(r["seconds"] == -1.0 for r in json.loads(out.read_text())["runs"])


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
        (["--feature-map", "nope"], "--feature-map must be one of"),
        (["--resume"], "--resume needs --json"),
        (["--device", "cuda"], "CUDA is not available"),
    ],
)
def test_sweep_bad_input(args, needle):
    if needle.startswith("CUDA") and torch.cuda.is_available():
        args = ["--ranks", "x"]
        needle = "integers"
    res = CliRunner().invoke(main, ["sweep", "--steps", "5", "--seeds", "1", *args])
    assert_error_line(res, needle)
