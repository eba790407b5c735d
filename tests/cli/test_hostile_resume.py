"""Hostile --resume files for minrank and frontier (issue 9): one line and exit 2, and no
wrong, edited or foreign result is ever shown as measured."""

import copy
import json

import pytest
from click.testing import CliRunner
from cliutil import assert_error_line

from sketchsim.cli import main

DEEP = "[" * 100_000 + "]" * 100_000


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def _edit(data, path, change):
    data = copy.deepcopy(data)
    change(data)
    path.write_text(json.dumps(data))
    return path


# ---------------------------------------------------------------- minrank


def _minrank(tmp_path, json_path, *extra):
    return run(
        "minrank", "--m", "2", "--train-max-m", "0", "--out-dir", tmp_path / "out",
        "--json", json_path, *extra,
    )  # fmt: skip


@pytest.fixture(scope="module")
def minrank_file(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("minrank")
    res = _minrank(tmp, tmp / "mr.json")
    assert res.exit_code == 0, res.output
    return json.loads((tmp / "mr.json").read_text())


def _row(key, value):
    def change(data):
        data["rows"][0][key] = value

    return change


def _part(part, key, value):
    def change(data):
        data["rows"][0][part][key] = value

    return change


@pytest.mark.parametrize(
    "change, needle",
    [
        (lambda d: d["rows"][0].pop("softmax"), "row 1 has no 'softmax'"),  # was KeyError
        (_part("softmax", "exact", None), "softmax has exact = None"),  # was TypeError
        (_part("construction", "rank", "3"), "construction has rank = '3'"),  # ValueError
        (_row("exact_rank", "q"), "has exact_rank = 'q'"),  # was ValueError in _fmt
        (_row("m", 2.5), "has m = 2.5"),  # was taken as m = 2
        (_part("lower", "certified_rank", "x"), "certified_rank = 'x'"),  # was shown as x
        (_part("lower", "certified_rank", 1000), "breaks certified <= construction"),  # a lie
        (_row("trained_nonneg", {"rank": "z", "via": None}), "trained_nonneg has rank = 'z'"),
        (lambda d: d["rows"].__setitem__(0, None), "row 1 is a NoneType"),
        (  # a trained nonnegative head below the sign-order bound is a lie too
            lambda d: d["rows"][0].update(
                lower_nonneg={"lower": 3}, trained_nonneg={"rank": 2, "via": None}
            ),
            "below the sign-order bound",
        ),
    ],
)
def test_minrank_resume_rejects_malformed_rows(tmp_path, minrank_file, change, needle):
    path = _edit(minrank_file, tmp_path / "bad.json", change)
    before = path.read_text()
    assert_error_line(_minrank(tmp_path, path, "--resume"), needle)
    assert path.read_text() == before  # nothing was overwritten


def test_minrank_resume_of_its_own_file_keeps_rows(tmp_path, minrank_file):
    path = _edit(minrank_file, tmp_path / "good.json", lambda d: None)
    res = _minrank(tmp_path, path, "--resume")
    assert res.exit_code == 0, res.output
    assert json.loads(path.read_text())["rows"] == minrank_file["rows"]


@pytest.mark.parametrize(
    "text, needle",
    [
        (DEEP, "nested too deeply"),  # was RecursionError
        ('{"rows": [{"m": NaN}]}', "NaN is not JSON"),
        ("[1, 2, 3]", "no list of rows"),
        ("null", "no list of rows"),
        ('{"rows": []}', "made with other parameters"),
    ],
)
def test_minrank_resume_rejects_foreign_json(tmp_path, text, needle):
    path = tmp_path / "bad.json"
    path.write_text(text)
    assert_error_line(_minrank(tmp_path, path, "--resume"), needle)


# ---------------------------------------------------------------- frontier

FRONTIER = ("frontier", "--vary", "bits=1..4", "--q", "2", "--s", "1", "--quiet")


@pytest.fixture(scope="module")
def frontier_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("frontier") / "fr.json"
    res = run(*FRONTIER, "--json", path)
    assert res.exit_code == 0, res.output
    return json.loads(path.read_text())


def _cell(key, value):
    def change(data):
        data["cells"][0][key] = value

    return change


@pytest.mark.parametrize(
    "change, needle",
    [
        (_cell("inputs", "many"), "inputs = 'many'"),  # was ValueError while rendering
        (_cell("declared_bits", "x"), "declared_bits = 'x'"),  # was ValueError in _num
        (_cell("found", "yes"), "found = 'yes'"),  # was shown as found
        (_cell("q", [1]), "q = [1]"),
        (lambda d: d["cells"][0].pop("identity"), "has no 'identity'"),  # older files
        (_cell("value", 1), "does not match its own evaluations"),  # bits=1 is wrong: a lie
        (_cell("evaluated", {"1": 0.0, "2": 7}), "outside [0, 1]"),
        (_cell("mode", "guessed"), "has mode 'guessed'"),
        # a cell from before the decodable frontier: not shown as "never decodable"
        (lambda d: d["cells"][0].pop("decodable_found"), "older sketchsim"),
        (_cell("decodable_value", 1), "does not match its own decodable evaluations"),
    ],
)
def test_frontier_resume_rejects_malformed_cells(tmp_path, frontier_file, change, needle):
    path = _edit(frontier_file, tmp_path / "bad.json", change)
    assert_error_line(run(*FRONTIER, "--json", path, "--resume"), needle)


def test_frontier_resume_rejects_deep_json(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text(DEEP)
    assert_error_line(run(*FRONTIER, "--json", path, "--resume"), "nested too deeply")


def test_frontier_resume_of_its_own_file_is_kept(tmp_path, frontier_file):
    path = _edit(frontier_file, tmp_path / "fr.json", lambda d: None)
    res = run(*FRONTIER, "--json", path, "--resume")
    assert res.exit_code == 0, res.output
    cells = json.loads(path.read_text())["cells"]
    assert cells[0]["seconds"] == frontier_file["cells"][0]["seconds"]  # not measured again


KERNEL_COPY = """
from sketchsim.sketch import Protocol
from sketchsim.sketch.kernel_head import KERNEL_PARAMS, kernel_plan


def setup(ctx, params):
    return kernel_plan(ctx, params["r"], {bits}, params["values"], heads=1)


P = Protocol("kernel", "a copy", setup, params=KERNEL_PARAMS, monotone=("bits",))
"""


@pytest.mark.slow  # compiles a plug-in engine: about 10 s
def test_frontier_resume_after_the_plugin_changed_measures_again(tmp_path):
    """Was: the edited plug-in (never correct) was shown with the old file's bits = 2."""
    plugin = tmp_path / "copy.py"
    plugin.write_text(KERNEL_COPY.format(bits='params["bits"]'))
    out = tmp_path / "fr.json"
    args = (*FRONTIER, "--protocol", f"{plugin}:P", "--json", out)
    assert run(*args).exit_code == 0
    assert json.loads(out.read_text())["cells"][0]["value"] == 2
    plugin.write_text(KERNEL_COPY.format(bits="1"))  # saturates: wrong for every bits
    res = run(*args, "--resume")
    assert res.exit_code == 0, res.output
    cell = json.loads(out.read_text())["cells"][0]
    assert cell["found"] is False and cell["value"] is None


# ------------------------------------------- other commands' resume files (one-line fixes)


@pytest.mark.parametrize(
    "argv",
    [
        ("transcript", "--q", "2", "--s", "1", "--protocol", "block-counts", "--quiet"),
        ("sweep", "--ranks", "1", "--seeds", "1", "--steps", "1", "--model", "kernel"),
    ],
)
def test_deeply_nested_resume_file_is_one_line(tmp_path, argv):
    """Was: RecursionError traceback from json.loads."""
    path = tmp_path / "deep.json"
    path.write_text(DEEP)
    res = run(*argv, "--json", path, "--resume")
    assert_error_line(res, "deep.json")


def test_cluster_state_with_a_deeply_nested_manifest_is_one_line(tmp_path):
    from sketchsim.cluster.client import _open_state
    from sketchsim.errors import SketchsimError

    (tmp_path / "manifest.json").write_text(DEEP)
    with pytest.raises(SketchsimError, match="unreadable manifest"):
        _open_state(tmp_path, {"k": 1}, 2)
