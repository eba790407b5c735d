"""Comma-separated options refuse an empty item instead of dropping it (#47)."""

import pytest
from click.testing import CliRunner
from cliutil import assert_error_line

from sketchsim.cli import main

FRONTIER = ["frontier", "--protocol", "kernel", "--vary", "bits=1..4"]


@pytest.mark.parametrize("value", ["4,,8", "4,", ",4", " , 4"])
@pytest.mark.parametrize("flag", ["--q", "--s"])
def test_frontier_refuses_an_empty_item(flag, value):
    res = CliRunner().invoke(main, [*FRONTIER, flag, value])
    assert_error_line(res, f"{flag} has an empty item in {value!r}: give comma-separated values")


def test_frontier_refuses_an_empty_value():
    res = CliRunner().invoke(main, [*FRONTIER, "--q", ""])
    assert_error_line(res, "--q is empty")


@pytest.mark.parametrize("value", ["2,,4", "2,", ",4"])
def test_minrank_refuses_an_empty_width(value):
    res = CliRunner().invoke(main, ["minrank", "--m", value])
    assert_error_line(res, f"--m has an empty item in {value!r}")


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--ranks", "1,,2"], "--ranks has an empty item in '1,,2'"),
        (["--lr", "0.01,"], "--lr has an empty item in '0.01,'"),
        (["--feature-map", ",mlp"], "--feature-map has an empty item in ',mlp'"),
        (["--suite", "capacity", "--q", "2,,4"], "--q has an empty item in '2,,4'"),
        (["--suite", "capacity", "--q", "2", "--heads", ""], "--heads is empty"),
    ],
)
def test_sweep_refuses_an_empty_item(args, needle):
    pytest.importorskip("torch", reason="the torch extra is not installed")
    res = CliRunner().invoke(main, ["sweep", "--steps", "5", "--seeds", "1", *args])
    assert_error_line(res, needle)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--screen-maps", "8:64:100", "--ranks", "16,,32"], "--ranks has an empty item"),
        (["--screen-stop", "0.1,"], "--screen-stop has an empty item in '0.1,'"),
    ],
)
def test_ablation_refuses_an_empty_item(args, needle):
    pytest.importorskip("torch", reason="the torch extra is not installed")
    assert_error_line(CliRunner().invoke(main, ["ablation", *args]), needle)
