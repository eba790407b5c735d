"""``info`` as a library run: the API writes the file the CLI writes (issue #46)."""

import json

from click.testing import CliRunner
from rich.console import Console

from sketchsim import api
from sketchsim.cli import main
from sketchsim.tables.info import show_info


def test_the_api_and_the_cli_write_the_same_info_file(tmp_path):
    res = CliRunner().invoke(main, ["info", "--json", str(tmp_path / "cli.json")])
    assert res.exit_code == 0, res.output
    facts = api.info(json_path=tmp_path / "api.json")
    cli = json.loads((tmp_path / "cli.json").read_text())
    assert json.loads((tmp_path / "api.json").read_text()) == cli
    assert set(facts) == {"versions", "machine", "engine_cache_dir", "cluster"}
    assert facts["versions"]["sketchsim"] == cli["versions"]["sketchsim"]


def test_the_info_table_shows_every_version_the_facts_hold():
    facts = api.info()
    console = Console(width=200, record=True, color_system=None)
    show_info(console, facts)
    text = console.export_text()
    for name, value in facts["versions"].items():
        assert name in text and str(value or "not installed") in text
