"""``verify`` as a library run (#46): the run checks the size, writes the result file (the
API the same as the CLI, an interrupted run's too) and holds the table's verdict."""

import json
import math

import pytest
from click.testing import CliRunner

from sketchsim import api
from sketchsim.cli import main
from sketchsim.errors import SketchsimError
from sketchsim.runs import verify as verify_run


def _result(path) -> dict:
    """A result file without its timing (in one process the command lines agree)."""
    data = json.loads(path.read_text())
    data.pop("seconds")
    return data


@pytest.mark.parametrize(
    "args, flags",
    [
        ((3, 3), []),  # the default construction on both sides
        ((3, 3, "rank1"), ["--construction", "rank1"]),
        ((2, 4, "onehot", 0.5, True), ["--construction", "onehot", "--beta", "0.5", "--causal"]),
    ],
    ids=["default", "rank1", "onehot-causal"],
)
def test_the_api_and_the_cli_write_the_same_file(tmp_path, args, flags):
    api_file, cli_file = tmp_path / "api.json", tmp_path / "cli.json"
    got = api.verify(*args, json_path=api_file)
    m, n = args[:2]
    res = CliRunner().invoke(
        main, ["verify", "--m", str(m), "--n", str(n), *flags, "--quiet", "--json", str(cli_file)]
    )
    assert res.exit_code == 0, res.output
    assert _result(api_file) == _result(cli_file)
    data = _result(cli_file)
    assert data["construction"] == got.construction
    assert data["parameters"]["construction"] == (args[2] if len(args) > 2 else "softmax")
    assert data["counterexample"] == got.counterexample and data["complete"] is True


def test_the_verdict_and_the_threshold_live_on_the_result():
    fails = api.verify(3, 3, "rank1")
    assert not fails.passed and fails.counterexample["index"] == 3
    assert fails.softmax_threshold is None  # rank1 has no temperature
    exact = api.verify(3, 3)
    assert exact.construction == verify_run.DEFAULT_CONSTRUCTION == "softmax"
    assert exact.passed and exact.softmax_threshold == pytest.approx(math.log(4))


def test_the_size_is_refused_by_the_run_before_any_work():
    with pytest.raises(SketchsimError, match="m\\*n = 120 exceeds the limit"):
        verify_run.check(40, 3)
    verify_run.check(40, 3, cluster="local:1")  # a cluster run checks its own limit
    res = CliRunner().invoke(main, ["verify", "--m", "40", "--n", "3", "--quiet"])
    assert res.exit_code == 2 and "m*n = 120 exceeds the limit" in res.output


def test_the_state_folder_is_beside_the_result_file():
    assert verify_run.state_folder(None, "out.json") == "out.json.state"
    assert verify_run.state_folder("keep", "out.json") == "keep"
    assert verify_run.state_folder(None, None) is None


def test_an_interrupted_run_writes_what_it_finished(tmp_path, monkeypatch):
    from sketchsim.heads import exhaustive as heads_verify

    partial = heads_verify.VerifyResult(3, 3, "softmax", 2.0, 3, False, 512, 0.1, 1.0, None,
                                        0.0, complete=False, checked=64)  # fmt: skip

    def interrupted(*args, **kwargs):
        raise heads_verify.VerifyInterrupted(partial)

    monkeypatch.setattr(heads_verify, "verify", interrupted)
    with pytest.raises(heads_verify.VerifyInterrupted):
        api.verify(3, 3, json_path=tmp_path / "api.json")
    res = CliRunner().invoke(main, ["verify", "--m", "3", "--n", "3", "--quiet",
                                    "--json", str(tmp_path / "cli.json")])  # fmt: skip
    assert res.exit_code == 1  # click.Abort
    assert _result(tmp_path / "api.json") == _result(tmp_path / "cli.json")
    assert _result(tmp_path / "cli.json")["complete"] is False
    assert _result(tmp_path / "cli.json")["checked"] == 64
