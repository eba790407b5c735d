"""sketchsim.results.atomic_path: all or nothing, umask honoured, no temporary left behind."""

import json
import os

import numpy as np
import pytest

from sketchsim.certify import build_witness, load_family, save_family
from sketchsim.codes import hadamard_code
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
