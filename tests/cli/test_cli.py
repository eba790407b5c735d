import json

import pytest
from click.testing import CliRunner
from cliutil import assert_error_line

import sketchsim
from sketchsim.cli import main


def run(*args):
    return CliRunner().invoke(main, list(args))


def test_version_and_help():
    res = run("--version")
    assert res.exit_code == 0 and sketchsim.__version__ in res.output
    res = run("verify", "--help")
    assert res.exit_code == 0 and "--construction" in res.output


def test_verify_json(tmp_path):
    path = tmp_path / "out" / "v.json"
    res = run(
        "verify", "--m", "3", "--n", "3", "--construction", "rank1", "--quiet", "--json", str(path)
    )
    assert res.exit_code == 0, res.output
    data = json.loads(path.read_text())
    for key in (
        "m",
        "n",
        "construction",
        "beta",
        "rank",
        "causal",
        "inputs",
        "max_abs_error",
        "exact_fraction",
        "counterexample",
    ):
        assert key in data
    assert data["inputs"] == 512 and data["beta"] is None and data["rank"] == 1
    ce = data["counterexample"]
    assert set(ce) >= {"tokens", "position", "target", "output"}
    assert data["versions"]["sketchsim"] == sketchsim.__version__
    assert "counterexample" in res.output


def test_verify_exact_softmax_reports_none():
    res = run("verify", "--m", "4", "--n", "3", "--construction", "softmax", "--quiet")
    assert res.exit_code == 0 and "no counterexample" in res.output


@pytest.mark.parametrize(
    "args, needle",
    [
        (["verify", "--m", "0"], "--m must be >= 1"),
        (["verify", "--n", "0"], "--n must be >= 1"),
        (["verify", "--beta", "0"], "beta must be > 0"),
        (["verify", "--m", "2", "--n", "14"], "exceeds the limit 26"),
        (["verify", "--construction", "nope"], "nope"),
        (["verify", "--m", "abc"], "not a valid integer"),
        (["verify", "--m", "21", "--n", "1", "--construction", "onehot"], "m = 21"),
        (["nosuchcommand"], "No such command"),
    ],
)
def test_bad_input_one_line_exit_2(args, needle):
    res = run(*args)
    assert_error_line(res, needle)


def test_library_errors_name_parameters_and_the_cli_names_flags(tmp_path):
    """The library speaks of ``codewords``; the CLI shows the flag that set it."""
    from sketchsim.certify import build_witness
    from sketchsim.certify.codes import hadamard_code
    from sketchsim.errors import SketchsimError

    with pytest.raises(SketchsimError, match="^codewords must be >= 2") as info:
        build_witness(hadamard_code(8), "hadamard", codewords=1)
    assert info.value.param == "codewords"
    res = run("witness", "--codewords", "1", "--out", str(tmp_path / "w.npz"))
    assert_error_line(res, "--codewords must be >= 2, got 1")
