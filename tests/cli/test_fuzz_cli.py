"""Hostile command lines never end in a traceback (issue 9): hypothesis over CLI arguments.

Each command gets a grammar of flags whose values mix valid small sizes with
hostile ones (negative, zero, huge, NaN, inf, text).  Whatever is drawn, the
command either succeeds quickly, or says one line and exits 2.  Huge values
must be refused before any allocation, so no draw may run long.
"""

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sketchsim.cli import main

HOSTILE = ["-1", "0", "nan", "inf", "-inf", "1e9", "abc", "", "1.5", str(2**70)]


def _flag(name, small):
    return st.tuples(st.just(name), st.sampled_from(small + HOSTILE))


def _command(name, flags, fixed=()):
    return st.lists(st.one_of(*flags), max_size=4).map(
        lambda parts: [name, *fixed] + [tok for pair in parts for tok in pair]
    )


COMMANDS = {
    "verify": _command(
        "verify",
        [
            _flag("--m", ["1", "2", "3", "342"]),
            _flag("--n", ["1", "2", "3"]),
            _flag("--beta", ["0.5", "2"]),
            _flag("--construction", ["rank1", "softmax", "onehot"]),
        ],
        fixed=("--m", "2", "--n", "2", "--quiet"),
    ),
    "transcript": _command(
        "transcript",
        [
            _flag("--q", ["1", "2", "3", "342", "400", "2000"]),
            _flag("--s", ["1", "2", "7"]),
            _flag("--samples", ["10", "100", "60000000"]),
            _flag("--seed", ["1", "7"]),
            _flag(
                "--protocol", ["raw", "kernel:r=1e8", "multihead:heads=1e9", "nope", "kernel:r=2"]
            ),
        ],
        fixed=("--q", "2", "--s", "1", "--protocol", "block-counts", "--quiet"),
    ),
    "codes": _command(
        "codes",
        [
            _flag("--m", ["8", "24", "63", "10008"]),
            _flag("--kind", ["greedy", "hadamard", "golay-octads"]),
            _flag("--d", ["2", "4", "40"]),
            _flag("--w", ["2", "4", "31"]),
        ],
        fixed=("--m", "8", "--kind", "greedy"),
    ),
    "bound": _command(
        "bound", [_flag("--m", ["8", "9", "1"]), _flag("--to", ["8", "9", "1e6"])], ("--m", "8")
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_no_traceback(command):
    runner = CliRunner()

    @settings(
        max_examples=25,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(COMMANDS[command])
    def check(argv):
        res = runner.invoke(main, argv)
        if res.exception is not None and not isinstance(res.exception, SystemExit):
            raise AssertionError(f"{argv}: {type(res.exception).__name__}: {res.exception}")
        assert res.exit_code in (0, 2), (argv, res.output)
        assert "Traceback" not in res.output, argv
        if res.exit_code == 2:
            lines = [ln for ln in res.output.splitlines() if ln.strip()]
            assert lines and lines[-1].startswith("error:"), (argv, res.output)

    check()
