"""``frontier`` as a library run (#46): the API and the CLI write the same result file, and
the run computes each cell's verdict and the statistics of the notes (the CLI formats them)."""

import json
import math

import pytest
from click.testing import CliRunner

from sketchsim import api
from sketchsim.cli import main
from sketchsim.runs.frontier import CellVerdict, FrontierPlan, FrontierRun
from sketchsim.sketch.measure import error_rate_upper


def _result(path) -> dict:
    """A result file without the cells' timings (in one process the command lines agree)."""
    data = json.loads(path.read_text())
    for cell in data["cells"]:
        cell.pop("seconds")
    return data


def _cli(*args) -> None:
    res = CliRunner().invoke(main, ["frontier", *map(str, args), "--quiet"])
    assert res.exit_code == 0, res.output


def test_the_api_and_the_cli_write_the_same_file(tmp_path):
    api_file, cli_file = tmp_path / "api.json", tmp_path / "cli.json"
    plan = FrontierPlan(("kernel", "block-counts"), "bits=1..3", (4,), (1, 3), search="scan")
    got = api.run(plan, json_path=api_file)
    _cli("--protocol", "kernel", "--protocol", "block-counts", "--vary", "bits=1..3",
         "--q", "4", "--s", "1,3", "--search", "scan", "--json", cli_file)  # fmt: skip
    assert _result(api_file) == _result(cli_file)
    assert _result(cli_file)["cells"] == [
        {k: v for k, v in c.items() if k != "seconds"} for c in got.cells
    ]


def test_one_cell_of_the_api_writes_the_file_of_one_cell(tmp_path):
    api_file, cli_file = tmp_path / "api.json", tmp_path / "cli.json"
    cell = api.frontier("kernel", "bits=1..8", 8, 7, samples=300, json_path=api_file)
    _cli("--vary", "bits=1..8", "--q", 8, "--s", 7, "--samples", 300, "--json", cli_file)
    assert _result(api_file) == _result(cli_file)
    assert _result(cli_file)["cells"][0]["value"] == cell.value


def test_the_verdicts_and_the_notes_live_on_the_run():
    plan = FrontierPlan(("kernel", "clipped-counts:levels=2"), "bits=1..2", (4,), (3,))
    run = api.run(plan)
    kernel, clipped = run.verdicts()
    assert (kernel.name, kernel.verdict) == ("kernel", "proved")  # decodable at 2, never decoded
    assert (clipped.name, clipped.verdict) == ("clipped-counts:levels=2", "none")
    assert not kernel.not_monotone and not clipped.not_monotone
    notes = run.notes()
    assert notes.proved and notes.missing and notes.fixed and not notes.not_monotone
    assert notes.sampled == ()

    sampled = api.run(FrontierPlan("kernel", "bits=1..8", (8,), (7,), samples=300))
    (cell,) = sampled.verdicts()
    assert cell.verdict == "not refuted"
    notes = sampled.notes()
    assert not notes.proved and not notes.missing and not notes.fixed
    ((n, error_upper, reach),) = notes.sampled
    assert n == 300 and error_upper == error_rate_upper(0, 300)
    assert math.isclose(reach, 3 / (300 * 299 / 2))


@pytest.mark.parametrize(
    "over, verdict, not_monotone",
    [
        ({}, "proved", False),
        ({"mode": "sampled"}, "not refuted", False),
        ({"found": False}, "proved", False),  # decodable still found
        ({"found": False, "decodable_found": False}, "none", False),
        ({"search": "scan", "monotone": False}, "proved", True),
        ({"search": "scan", "monotone": None}, "proved", False),
    ],
)
def test_a_cells_verdict(over, verdict, not_monotone):
    cell = {"spec": "", "protocol": "kernel", "found": True, "decodable_found": True,
            "mode": "exhaustive", "search": "bisection", "monotone": True,
            "inputs": 16} | over  # fmt: skip
    got = CellVerdict.of(cell)
    assert (got.name, got.verdict, got.not_monotone) == ("kernel", verdict, not_monotone)
    assert FrontierRun(None, [cell]).notes().not_monotone is not_monotone
