"""Resume keys finished work by (name, params, source identity) and checks every entry."""

import json

import pytest
from click.testing import CliRunner
from cliutil import assert_error_line
from plugin_files import write_plugin

from sketchsim.cli import main
from sketchsim.sketch.plugins import builtin_dir, file_identity, resolve


def transcript(*args):
    return CliRunner().invoke(main, ["transcript", "--q", "2", "--s", "2", "--quiet", *args])


def test_identity_is_the_file_hash(tmp_path):
    r = resolve("block-counts")
    assert r.identity == file_identity(builtin_dir() / "block_counts.py")
    assert r.identity.startswith("sha256:") and len(r.identity) == 7 + 64
    a = write_plugin(tmp_path, "a.py")
    b = write_plugin(tmp_path, "b.py", answer_body="return 0")
    assert resolve(f"{a}:t").identity != resolve(f"{b}:t").identity


def test_resume_with_a_same_named_fake_measures_again(tmp_path):
    """A fake also named block-counts (answering 0) must not inherit the built-in's 1.0."""
    out = tmp_path / "t.json"
    assert transcript("--protocol", "block-counts", "--json", str(out)).exit_code == 0
    first = json.loads(out.read_text())["protocols"][0]
    assert first["correct_fraction"] == 1.0 and first["identity"].startswith("sha256:")
    fake = write_plugin(tmp_path, "fake.py", name="block-counts", answer_body="return 0")
    res = transcript("--protocol", f"{fake}:block-counts", "--json", str(out), "--resume")
    assert res.exit_code == 0, res.output
    (entry,) = json.loads(out.read_text())["protocols"]
    assert entry["identity"] == file_identity(fake) != first["identity"]
    assert entry["correct_fraction"] < 1.0
    # and the same built-in run again is taken from the file, unchanged
    res = transcript("--protocol", f"{fake}:block-counts", "--json", str(out), "--resume")
    assert json.loads(out.read_text())["protocols"][0]["seconds"] == entry["seconds"]


@pytest.mark.slow  # compiles the plug-in twice (about 12 s on the 2-core machine)
def test_resume_after_the_plugin_file_changed_measures_again(tmp_path):
    out = tmp_path / "t.json"
    plug = write_plugin(tmp_path, "p.py")
    assert transcript("--protocol", f"{plug}:t", "--json", str(out)).exit_code == 0
    assert json.loads(out.read_text())["protocols"][0]["correct_fraction"] == 1.0
    write_plugin(tmp_path, "p.py", answer_body="return 0")
    # a changed file is a new identity, and is imported afresh in the same process
    assert transcript("--protocol", f"{plug}:t", "--json", str(out), "--resume").exit_code == 0
    assert json.loads(out.read_text())["protocols"][0]["correct_fraction"] < 1.0


@pytest.mark.parametrize(
    "content,needle",
    [
        ("[1, 2, 3]", "not a transcript result"),
        ("null", "not a transcript result"),
        ('"text"', "not a transcript result"),
        ('{"protocols": 5}', "not a transcript result"),
    ],
)
def test_resume_file_of_the_wrong_shape_is_one_line(tmp_path, content, needle):
    out = tmp_path / "t.json"
    out.write_text(content)
    res = transcript("--protocol", "block-counts", "--json", str(out), "--resume")
    assert_error_line(res, needle)


@pytest.mark.parametrize(
    "change,needle",
    [
        (lambda e: e.pop("identity"), "protocol entry 1 has no 'identity'"),
        (lambda e: e.pop("correct_fraction"), "protocol entry 1 has no 'correct_fraction'"),
        (lambda e: e.update(correct_fraction="1.0"), "correct_fraction = '1.0', of the wrong"),
        (lambda e: e.update(wrong_inputs=True), "wrong_inputs = True, of the wrong type"),
        (lambda e: e.update(collision={"inputs": [0, 1]}), "malformed 'collision'"),
    ],
)
def test_resume_entry_missing_or_mistyped_keys_is_one_line(tmp_path, change, needle):
    out = tmp_path / "t.json"
    assert transcript("--protocol", "block-counts", "--json", str(out)).exit_code == 0
    data = json.loads(out.read_text())
    change(data["protocols"][0])
    out.write_text(json.dumps(data))
    res = transcript("--protocol", "block-counts", "--json", str(out), "--resume")
    assert_error_line(res, needle)


def test_resume_entry_not_an_object_is_one_line(tmp_path):
    out = tmp_path / "t.json"
    assert transcript("--protocol", "block-counts", "--json", str(out)).exit_code == 0
    data = json.loads(out.read_text())
    data["protocols"] = [7]
    out.write_text(json.dumps(data))
    res = transcript("--protocol", "block-counts", "--json", str(out), "--resume")
    assert_error_line(res, "protocol entry 1 is a int, not an object")


def test_a_failing_protocol_leaves_the_file_incomplete(tmp_path):
    """Results so far are kept for resume, but the file never says complete."""
    out = tmp_path / "t.json"
    bad = write_plugin(tmp_path, "bad.py", update_body="state[5] = 1")
    res = transcript("--protocol", "block-counts", "--protocol", f"{bad}:t", "--json", str(out))
    assert_error_line(res, "protocol t: update at layer 1, token 1 indexed", only_line=False)
    data = json.loads(out.read_text())
    assert data["complete"] is False
    assert [p["name"] for p in data["protocols"]] == ["block-counts"]
