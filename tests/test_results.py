"""sketchsim.results.atomic_path: all or nothing, umask honoured, no temporary left behind."""

import json
import os

import numpy as np
import pytest

from sketchsim.certify import build_witness, load_family, save_family
from sketchsim.certify.codes import hadamard_code
from sketchsim.results import atomic_path, write_json_atomic


def test_atomic_path_replaces_on_success_with_umask_mode(tmp_path):
    target = tmp_path / "sub" / "out.txt"
    old = os.umask(0o027)
    try:
        with atomic_path(target) as tmp:
            assert tmp.parent == target.parent and tmp != target
            tmp.write_text("new")
            assert not target.exists()  # nothing visible before the block ends
    finally:
        os.umask(old)
    assert target.read_text() == "new"
    assert (target.stat().st_mode & 0o777) == 0o640
    assert os.listdir(target.parent) == ["out.txt"]


@pytest.mark.parametrize("exc", [RuntimeError, KeyboardInterrupt])
def test_atomic_path_keeps_the_old_file_when_the_writer_fails(tmp_path, exc):
    target = tmp_path / "out.json"
    target.write_text("old")
    with pytest.raises(exc):
        with atomic_path(target) as tmp:
            tmp.write_text("half")
            raise exc()
    assert target.read_text() == "old"
    assert os.listdir(tmp_path) == ["out.json"]


def test_write_json_atomic_unserialisable_leaves_old_file(tmp_path):
    target = tmp_path / "r.json"
    write_json_atomic(target, {"a": 1})
    with pytest.raises(TypeError):
        write_json_atomic(target, {"a": object()})
    assert json.loads(target.read_text()) == {"a": 1}
    assert os.listdir(tmp_path) == ["r.json"]


def test_save_family_is_atomic_and_round_trips(tmp_path):
    fam = build_witness(hadamard_code(8), "hadamard", codewords=4)
    path = tmp_path / "w.npz"
    save_family(fam, path)
    back = load_family(path)
    assert np.array_equal(back.tokens, fam.tokens) and back.position == fam.position
    assert os.listdir(tmp_path) == ["w.npz"]
    assert (path.stat().st_mode & 0o777) == 0o666 & ~_umask()


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


@pytest.mark.parametrize(
    "text, needle",
    [
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
        ('{"a": NaN}', "NaN is not JSON"),
        ('{"a": -Infinity}', "-Infinity is not JSON"),
        ("{", "is not valid JSON"),
        ("", "is not valid JSON"),
    ],
)
def test_read_json_failures_are_one_sketchsim_error(tmp_path, text, needle):
    from sketchsim.errors import SketchsimError
    from sketchsim.results import read_json

    path = tmp_path / "x.json"
    path.write_text(text)
    with pytest.raises(SketchsimError, match=needle):
        read_json(path)
    path.write_bytes(b"\xff\xfe{")
    with pytest.raises(SketchsimError, match="not UTF-8"):
        read_json(path)
    with pytest.raises(SketchsimError, match="cannot read"):
        read_json(tmp_path)
    path.write_text('{"a": [1, 2.5, null]}')
    assert read_json(path) == {"a": [1, 2.5, None]}


def test_field_problem_checks_json_types():
    from sketchsim.results import field_problem

    fields = {"n": int, "x": float, "s": (str, None)}
    assert field_problem({"n": 1, "x": 2, "s": None}, fields) is None
    assert field_problem({"n": 1, "x": 0.5, "s": "a", "extra": 0}, fields) is None
    assert field_problem([1], fields) == "is a list, not an object"
    assert field_problem({"x": 1.0, "s": None}, fields) == "has no 'n'"
    assert "n = True" in field_problem({"n": True, "x": 1.0, "s": None}, fields)
    assert "n = 1.0" in field_problem({"n": 1.0, "x": 1.0, "s": None}, fields)
    assert "x = inf" in field_problem({"n": 1, "x": float("inf"), "s": None}, fields)
    assert "s = 3" in field_problem({"n": 1, "x": 1.0, "s": 3}, fields)
