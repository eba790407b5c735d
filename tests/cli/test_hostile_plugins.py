"""Misbehaving protocol plug-ins found by the issue-9 hunt: one line naming the protocol,
exit 2, never a traceback, a hang or another exit code."""

from pathlib import Path

import pytest
from click.testing import CliRunner
from cliutil import assert_error_line
from plugin_files import write_plugin

from sketchsim.cli import main


def transcript(plugin: Path, *extra):
    argv = ["transcript", "--q", "2", "--s", "1", "--quiet", "--protocol", f"{plugin}:P", *extra]
    return CliRunner().invoke(main, argv)


def _protocol_args(tmp_path, args: str, header: str = "") -> Path:
    path = write_plugin(tmp_path, jit=False, name="bad", header=header)
    text = path.read_text().replace('"a test plug-in", setup)', f'"a test plug-in", setup, {args})')
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "args, needle",
    [
        ('params=("r",)', "params must be Param objects, got 'r'"),  # was AttributeError
        (
            'params=(Param("r", "int", 1), Param("r", "int", 2))',
            "declares parameter 'r' twice",
        ),  # was: the second silently won
        ('params=(Param("r", "int", "abc"),)', "parameter r: default 'abc' is not of type int"),
        (
            'params=(Param("r", "int", 0, minimum=1),)',
            "parameter r: default 0 is below its minimum 1",
        ),
        ('families="hard"', "families must be a tuple of names, got 'hard'"),  # was h, a, r, d
        ('monotone="r"', "monotone must be a tuple of names, got 'r'"),
        ("preflight=5", "preflight must be a function (params, family), got 5"),
    ],
)
def test_malformed_protocol_declarations_are_one_line(tmp_path, args, needle):
    path = _protocol_args(tmp_path, args, header="from sketchsim.sketch import Param")
    assert_error_line(transcript(path), needle)


def test_protocol_name_must_be_a_name(tmp_path):
    """Was: Protocol(5, ...) measured and written to JSON with the name 5."""
    path = write_plugin(tmp_path, jit=False, name="x")
    path.write_text(path.read_text().replace('Protocol("x"', "Protocol(5"))
    assert_error_line(transcript(path), "a protocol's name must be a non-empty string, got 5")


@pytest.mark.parametrize("code", ["sys.exit(3)", "raise SystemExit(0)"])
def test_setup_calling_exit_is_one_line(tmp_path, code):
    """Was: the process ended with the plug-in's exit code (3) after the header panel."""
    path = write_plugin(tmp_path, jit=False, header="import sys")
    head = "def setup(ctx, params):\n"
    path.write_text(path.read_text().replace(head, f"{head}    {code}\n"))
    res = transcript(path)
    assert res.exit_code == 2, res.output
    assert (
        res.output.strip()
        .splitlines()[-1]
        .startswith("error: protocol t: setup failed: SystemExit")
    )


def test_a_plan_with_millions_of_layers_is_refused_before_running(tmp_path):
    """Was: 10^7 layers ran for hours (10^4 layers took 36 s at q = 3)."""
    path = write_plugin(tmp_path)
    path.write_text(path.read_text().replace("return Plan([layer]", "return Plan([layer] * 10**7"))
    assert_error_line(transcript(path), "10,000,000 layers, above the limit", only_line=False)


def _with_preflight(tmp_path, body: str) -> Path:
    path = write_plugin(tmp_path, jit=False, name="pf")
    text = path.read_text().replace(
        '"a test plug-in", setup)', '"a test plug-in", setup, preflight=check)'
    )
    head = "def setup(ctx, params):\n"
    path.write_text(text.replace(head, f"def check(params, family):\n    {body}\n\n\n{head}"))
    return path


def test_a_preflight_refusal_stops_the_run_before_any_work(tmp_path):
    """A plug-in checks its own input (as ``trained`` checks its weights' family): its
    PluginError is the run's one line, named by the protocol, and nothing is written."""
    body = (
        "from sketchsim.errors import PluginError\n"
        "    if family.q == 2:\n"
        "        raise PluginError(f'not for q = {family.q} ({family.name})')"
    )
    path = _with_preflight(tmp_path, body)
    out = tmp_path / "out.json"
    assert_error_line(transcript(path, "--json", str(out)), "protocol pf: not for q = 2 (hard)")
    assert not out.exists()
    argv = ["transcript", "--q", "3", "--s", "1", "--quiet", "--protocol", f"{path}:P"]
    assert CliRunner().invoke(main, argv).exit_code == 0


def test_a_failing_preflight_is_one_line(tmp_path):
    path = _with_preflight(tmp_path, "raise KeyError('weights')")
    assert_error_line(transcript(path), "protocol pf: preflight failed: KeyError: 'weights'")
