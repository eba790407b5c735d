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
