"""Hostile numbers found by the issue-9 hunt beyond its examples: one line, exit 2."""

import pytest
from click.testing import CliRunner
from cliutil import assert_error_line

from sketchsim.cli import main


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.mark.parametrize("lr", ["1e300", "1e39", "3e38"])
def test_sweep_learning_rate_beyond_float32_is_refused(lr):
    """Was: RuntimeError 'value cannot be converted to type float without overflow' from
    torch's Adam step (lr / bias correction does not fit a float32 scalar)."""
    res = run("sweep", "--ranks", "1", "--seeds", "1", "--steps", "1", "--model", "kernel",
              "--lr", lr)  # fmt: skip
    assert_error_line(res, "--lr must list finite numbers in (0, 1e6]")


def test_verify_softmax_underflow_is_one_line_without_numpy_warnings():
    """Was: a NumPy 'invalid value encountered in divide' RuntimeWarning before the error."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # whatever the test runner's filters say
        res = run("verify", "--m", "2", "--n", "2", "--construction", "softmax",
                  "--beta", "2000", "--quiet")  # fmt: skip
    assert_error_line(res, "all kernel weights are zero")
    assert not [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]


@pytest.fixture
def family_file(tmp_path):
    from sketchsim.certify import build_witness, save_family
    from sketchsim.certify.codes import hadamard_code

    return save_family(build_witness(hadamard_code(8), "hadamard", 4), tmp_path / "w.npz")


def test_json_name_at_the_file_system_limit_is_written(tmp_path, family_file):
    """Was: the temporary name (target name + 13 characters) failed after the work."""
    out = tmp_path / ("a" * 250 + ".json")  # 255 bytes: the usual NAME_MAX
    res = run("certify", family_file, "--json", out)
    assert res.exit_code == 0, res.output
    assert out.is_file() and [p.name for p in tmp_path.iterdir()] != []


def test_json_name_over_the_limit_is_refused_before_work(tmp_path, family_file):
    """Was: 'File name too long' after the certificate was computed and printed."""
    res = run("certify", family_file, "--json", tmp_path / ("a" * 300 + ".json"))
    assert_error_line(res, "a file name is longer than the 255 bytes allowed")


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_json_naming_a_special_file_is_refused(tmp_path, family_file, kind):
    """Was: a named pipe or a device node was replaced by a regular file."""
    import os
    import stat

    target = tmp_path / "special.json"
    if kind == "fifo":
        os.mkfifo(target)
    else:
        try:
            os.mknod(target, 0o600 | stat.S_IFCHR, os.makedev(1, 3))
        except PermissionError:
            pytest.skip("creating a device node needs root")
    res = run("certify", family_file, "--json", target)
    assert_error_line(res, "is not a regular file")
    mode = target.lstat().st_mode
    assert stat.S_ISFIFO(mode) if kind == "fifo" else stat.S_ISCHR(mode)


def test_frontier_plot_with_no_correct_value_is_drawn(tmp_path):
    """Was: 'Data cannot be log-scaled' traceback from matplotlib, the JSON left incomplete."""
    import json

    out, plot = tmp_path / "f.json", tmp_path / "f.png"
    res = run("frontier", "--vary", "bits=1..1", "--q", "4", "--s", "7", "--quiet",
              "--plot", plot, "--json", out)  # fmt: skip
    assert res.exit_code == 0, res.output
    assert plot.stat().st_size > 0
    data = json.loads(out.read_text())
    assert data["complete"] is True and data["cells"][0]["found"] is False
