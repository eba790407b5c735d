"""Output paths are checked before work starts and never overwrite an input (issue 9)."""

import json
import os
import stat

import pytest
from click.testing import CliRunner
from cliutil import assert_error_line

from sketchsim.cli import main
from sketchsim.results import write_json_atomic


def run(*args):
    return CliRunner().invoke(main, list(args))


@pytest.mark.parametrize(
    "target, needle",
    [
        ("{file}/x.json", "is a file, not a directory"),
        ("/proc/sketchsim-x.json", "virtual file system"),
        ("{dir}", "is a directory"),
    ],
)
def test_unwritable_json_is_refused_before_work(tmp_path, target, needle):
    (tmp_path / "f").write_text("x")
    path = target.format(file=tmp_path / "f", dir=tmp_path)
    res = run("verify", "--m", "2", "--n", "2", "--json", path)
    assert_error_line(res, needle)


def test_plot_suffix_is_checked(tmp_path):
    res = run("sweep", "--plot", str(tmp_path / "p.gif"), "--ranks", "1")
    assert_error_line(res, "unsupported file type")


def test_json_equal_to_input_family_is_refused(tmp_path):
    fam = tmp_path / "w.npz"
    assert run("witness", "--m", "8", "--out", str(fam)).exit_code == 0
    before = fam.read_bytes()
    res = run("certify", str(fam), "--json", str(fam))
    assert_error_line(res, "would overwrite the input")
    assert fam.read_bytes() == before


def test_two_outputs_naming_one_file_are_refused(tmp_path):
    out = tmp_path / "x.npz"
    res = run("witness", "--m", "8", "--out", str(out), "--json", str(out))
    assert_error_line(res, "name the same file")
    assert not out.exists()


def test_json_equal_to_plugin_file_is_refused(tmp_path):
    plugin = tmp_path / "p.py"
    plugin.write_text("raise SystemExit('never imported')\n")
    res = run(
        "transcript", "--q", "2", "--s", "1", "--protocol", f"{plugin}:X", "--json", str(plugin)
    )
    assert_error_line(res, "would overwrite the input")
    assert plugin.read_text().startswith("raise SystemExit")


def test_result_files_are_strict_json_and_honour_umask(tmp_path):
    old = os.umask(0o022)
    try:
        path = write_json_atomic(tmp_path / "r.json", {"a": float("nan"), "b": [float("inf"), 1.5]})
    finally:
        os.umask(old)
    assert json.loads(path.read_text(), parse_constant=pytest.fail) == {"a": None, "b": [None, 1.5]}
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


# Issue 47, case 2: an input named inside a folder or a spec is an input too.  One row per
# command that reads files: (argv with {in} for the input, the output option, the input's name).
INSIDE = [
    (["capacity", "{dir}"], "--json", "FOLDER"),
    (["audit", "{dir}"], "--json", "FOLDER"),
    (["transcript", "--q", "2", "--s", "1", "--protocol", "trained:weights={in}"], "--json",
     "--protocol"),
    (["frontier", "--vary", "bits=1..2", "--protocol", "trained:weights={in},bits=2"], "--json",
     "--protocol"),
    (["transcript", "--q", "2", "--s", "1", "--family", "{in}:F"], "--json", "--family"),
    (["sweep", "--suite", "capacity", "--model-plugin", "{in}:M"], "--json", "--model-plugin"),
    (["certify", "{in}"], "--json", "PATH"),
]  # fmt: skip


@pytest.mark.parametrize("argv, flag, name", INSIDE, ids=lambda x: " ".join(x)[:40])
def test_no_output_over_a_file_inside_a_folder_or_a_spec(tmp_path, argv, flag, name):
    folder = tmp_path / "W"
    folder.mkdir()
    target = folder / "in.npz"  # read: a weights file in a folder, or named by a spec
    target.write_bytes(b"an input: never replaced")
    argv = [a.replace("{dir}", str(folder)).replace("{in}", str(target)) for a in argv]
    res = run(*argv, flag, str(target))
    if res.exit_code == 2 and "would overwrite" not in res.output:
        pytest.fail(f"refused for another reason: {res.output}")
    assert_error_line(res, f"{flag} would overwrite the input")
    assert f"({name})" in res.output
    assert target.read_bytes() == b"an input: never replaced"


PLOTS = [
    ["frontier", "--vary", "bits=1..2"],
    ["minrank", "--m", "2"],
    ["audit", "{tmp}"],
    ["capacity", "{tmp}"],
    ["sweep", "--ranks", "1"],
]


@pytest.mark.parametrize("argv", PLOTS, ids=lambda a: a[0])
def test_plot_without_matplotlib_is_refused_before_the_run(tmp_path, monkeypatch, argv):
    """Was: an ImportError traceback after the whole run (frontier, minrank, audit)."""
    import sys

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib fails
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    res = run(*argv, "--plot", str(tmp_path / "p.png"))
    assert_error_line(res, "plots need matplotlib")
    assert "pip install 'sketchsim[plot]'" in res.output
    assert not (tmp_path / "p.png").exists()


@pytest.mark.parametrize("argv", PLOTS[:2], ids=lambda a: a[0])
def test_a_matplotlib_that_is_found_but_fails_to_import_is_refused_before_the_run(
    tmp_path, monkeypatch, argv
):
    """#62: present but broken (a numpy ABI mismatch): finding it said yes, and the run
    ended in a traceback; importing it decides."""
    import importlib.util
    import sys

    assert importlib.util.find_spec("matplotlib") is not None
    monkeypatch.delitem(sys.modules, "matplotlib.pyplot", raising=False)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)  # found, fails to import
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    res = run(*argv, "--plot", str(tmp_path / "p.png"))
    assert_error_line(res, "plots need matplotlib (")
    assert "Traceback" not in res.output and not (tmp_path / "p.png").exists()


@pytest.mark.parametrize(
    "args, folder",
    [
        (("minrank", "--m", "x"), "minrank-out"),
        (("sweep", "--ranks", "x"), "results"),
        (("minrank", "--m", "x", "--out-dir", "a/b/c"), "a"),
    ],
)
def test_a_refused_command_leaves_no_output_folder(tmp_path, monkeypatch, args, folder):
    monkeypatch.chdir(tmp_path)
    res = run(*args)
    assert res.exit_code == 2
    assert not (tmp_path / folder).exists()
    assert list(tmp_path.iterdir()) == []


def test_an_output_folder_under_a_missing_parent_is_created_on_write(tmp_path):
    out = tmp_path / "new" / "deeper"
    res = run("witness", "--m", "8", "--out", str(out / "w.npz"))
    assert res.exit_code == 0, res.output
    assert (out / "w.npz").is_file()


def test_no_new_input_file_lands_inside_a_folder_argument(tmp_path):
    # #60: `capacity W --json W/r.npz` would be read as a weights file by the next run
    folder = tmp_path / "W"
    folder.mkdir()
    res = run("capacity", str(folder), "--json", str(folder / "r.npz"))
    assert_error_line(res, "would land inside FOLDER")
    assert not (folder / "r.npz").exists()
