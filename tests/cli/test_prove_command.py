"""``prove``, ``check-proof`` and ``capacity --prove`` on the command line (issue #61)."""

import json

import numpy as np
import pytest
from click.testing import CliRunner
from cliutil import assert_error_line
from weights_files import exact_sum_weights, random_weights

from sketchsim.cli import main
from sketchsim.sketch.family_plugins import make_family


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture
def right_and_wrong(tmp_path):
    """F(16,7): a model right on every input and one wrong on the one input t = 7...7."""
    fam = make_family("hard", 16, 7)
    folder = tmp_path / "models"
    folder.mkdir()
    exact_sum_weights(folder / "right.npz", fam)
    exact_sum_weights(folder / "wrong.npz", fam, drop=40.0)
    return folder


def test_prove_says_proved_and_refuted_with_exit_0(right_and_wrong, tmp_path):
    res = run("prove", right_and_wrong / "right.npz", "--bits", 4, "--rounding", "cut",
              "--json", tmp_path / "r.json", "--proof", tmp_path / "p.json")  # fmt: skip
    assert res.exit_code == 0, res.output
    out = json.loads((tmp_path / "r.json").read_text())
    assert out["verdict"] == "proved" and out["leaves"] == 16 * 8 and out["cut_bits"] == 64
    assert out["weights_sha256"] and (tmp_path / "p.json").exists()
    res = run("prove", right_and_wrong / "wrong.npz", "--bits", 4, "--rounding", "cut",
              "--json", tmp_path / "w.json", "--proof", tmp_path / "none.json")  # fmt: skip
    assert res.exit_code == 0, res.output
    out = json.loads((tmp_path / "w.json").read_text())
    assert out["verdict"] == "refuted" and out["counterexample"] == [7] * 16
    assert out["engine_answers"] != [7] * 16 and "refuted" in res.output
    assert not (tmp_path / "none.json").exists()  # no proof of a refuted claim


def test_an_exhausted_budget_is_unknown_with_open_boxes(right_and_wrong, tmp_path):
    res = run("prove", right_and_wrong / "right.npz", "--bits", 4, "--budget", 1e-9,
              "--json", tmp_path / "r.json")  # fmt: skip
    assert res.exit_code == 0, res.output
    out = json.loads((tmp_path / "r.json").read_text())
    assert out["verdict"] == "unknown" and out["open_boxes"] > 0


@pytest.mark.parametrize("args, needle", [
    (["--bits", 0], "--bits must be in 1..32"),
    (["--bits", 33], "--bits must be in 1..32"),
    (["--bits", 4, "--budget", -1], "--budget must be > 0"),
])  # fmt: skip
def test_bad_input_is_one_line_and_exit_2(right_and_wrong, args, needle):
    assert_error_line(run("prove", right_and_wrong / "right.npz", *args), needle)


def test_a_kernel_file_or_a_missing_one_is_refused(tmp_path):
    fam = make_family("hard", 2, 1)
    random_weights(tmp_path / "k.npz", fam, 1, 1, 1, 2, "elu1")
    assert_error_line(run("prove", tmp_path / "k.npz", "--bits", 4), "causal files only")
    res = run("prove", tmp_path / "missing.npz", "--bits", 4)
    assert res.exit_code == 2 and "Traceback" not in res.output


@pytest.mark.slow
def test_capacity_prove_labels_sampled_rows(right_and_wrong, tmp_path):
    res = run("capacity", right_and_wrong, "--samples", 500, "--rounding", "cut",
              "--prove", 30, "--json", tmp_path / "c.json")  # fmt: skip
    assert res.exit_code == 0, res.output
    rows = {r["weights"]: r for r in json.loads((tmp_path / "c.json").read_text())["rows"]}
    right, wrong = rows["right.npz"], rows["wrong.npz"]
    assert right["mode"] == wrong["mode"] == "sampled"  # both right on their sample
    assert right["evidence"] == "proved" and right["prove"]["verdict"] == "proved"
    assert wrong["evidence"] == "refuted" and wrong["decoded"] is False
    assert wrong["prove"]["counterexample"] == [7] * 16
    assert "proved" in res.output and "refuted" in res.output


def test_capacity_without_prove_keeps_sampled(right_and_wrong, tmp_path):
    res = run("capacity", right_and_wrong, "--samples", 200, "--json", tmp_path / "c.json")
    assert res.exit_code == 0, res.output
    rows = json.loads((tmp_path / "c.json").read_text())["rows"]
    assert {r["evidence"] for r in rows} == {"sampled"} and all("prove" not in r for r in rows)
    assert np.isfinite([r["floor_at_error"] for r in rows]).all()


def test_frontier_prove_labels_sampled_cells(right_and_wrong, tmp_path):
    specs = [
        f"trained:weights={right_and_wrong / n},rounding=cut" for n in ("right.npz", "wrong.npz")
    ]
    args = ["frontier", "--vary", "bits=3..5", "--q", 16, "--s", 7, "--samples", 300,
            "--prove", 30, "--json", tmp_path / "f.json", "--plot", tmp_path / "f.png"]  # fmt: skip
    for spec in specs:
        args += ["--protocol", spec]
    res = run(*args)
    assert res.exit_code == 0, res.output
    cells = json.loads((tmp_path / "f.json").read_text())["cells"]
    right, wrong = cells
    assert right["mode"] == "sampled" and right["value"] == 4  # its registers: step 1 at K = 4
    assert right["evidence"] == "proved" and right["prove"]["verdict"] == "proved"
    assert wrong["evidence"] == "refuted" and wrong["prove"]["counterexample"] == [7] * 16
    assert "refuted" in res.output and "prove found an input" in res.output
    assert (tmp_path / "f.png").stat().st_size > 0
    kept = [a for a in args if a not in ("--prove", 30, "--plot", tmp_path / "f.png")]
    plain = run(*kept[:-2], "--json", tmp_path / "g.json")
    assert plain.exit_code == 0, plain.output
    cells = json.loads((tmp_path / "g.json").read_text())["cells"]
    assert {c["evidence"] for c in cells} == {"sampled"} and all("prove" not in c for c in cells)
