"""The lazily loaded command table of sketchsim/cli/app.py against the real commands."""

import subprocess
import sys

import click
from click.testing import CliRunner

from sketchsim.cli import main
from sketchsim.cli.app import COMMANDS, SHORT_HELP, load_all_commands


def test_tables_name_every_command_its_module_and_help():
    load_all_commands()
    assert set(main.commands) == set(COMMANDS) == set(SHORT_HELP)
    for name, cmd in main.commands.items():
        assert cmd.callback.__module__ == f"sketchsim.cli.{COMMANDS[name]}", name
        first = " ".join((cmd.help or "").split("\n\n")[0].split())
        assert SHORT_HELP[name] == first, name


def test_help_without_loading_equals_help_after_loading():
    code = (
        "import sys; from click.testing import CliRunner; from sketchsim.cli import main; "
        "print(CliRunner().invoke(main, ['--help']).output, end=''); "
        "print(*sorted(m for m in ('rich', 'numpy', 'numba', 'scipy', 'torch', "
        "'sketchsim.cli.certify', 'sketchsim.cli.transcript') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    lazy_help, _, loaded = out.rpartition("\n")
    assert loaded == ""  # --help imported none of them
    load_all_commands()
    assert lazy_help == CliRunner().invoke(main, ["--help"]).output


def test_commands_load_on_first_use():
    runner = CliRunner()
    result = runner.invoke(main, ["verify", "--help"])
    assert result.exit_code == 0 and "2^(m*n)" in result.output
    assert isinstance(main.get_command(click.Context(main), "transcript"), click.Command)
    assert main.get_command(click.Context(main), "no-such-command") is None
    result = runner.invoke(main, ["no-such-command"])
    assert result.exit_code == 2
