"""Hostile family files given to certify and sweep (issue 9): one line, exit 2."""

import json

import numpy as np
import pytest
from click.testing import CliRunner
from cliutil import assert_error_line

from sketchsim.certify import build_witness, save_family
from sketchsim.certify.codes import hadamard_code
from sketchsim.cli import main


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture
def family(tmp_path):
    fam = build_witness(hadamard_code(8), "hadamard", codewords=4)
    return fam


def _save(path, fam, **override):
    arrays = {
        "tokens": fam.tokens,
        "position": np.int64(fam.position),
        "targets": fam.targets,
        "meta": np.array(json.dumps(fam.meta)),
    }
    arrays.update(override)
    np.savez(path, **arrays)
    return path


@pytest.mark.parametrize(
    "meta, needle",
    [
        ("[" * 100_000 + "]" * 100_000, "metadata is not JSON"),  # was RecursionError
        ("[1, 2]", "metadata must be a JSON object, got list"),  # was accepted
        ("7", "metadata must be a JSON object, got int"),
        ("{not json", "metadata is not JSON"),
    ],
)
@pytest.mark.parametrize("command", ["certify", "sweep"])
def test_family_metadata_must_be_a_json_object(tmp_path, family, meta, needle, command):
    path = _save(tmp_path / "f.npz", family, meta=np.array(meta))
    args = ["certify", path] if command == "certify" else ["sweep", "--family", path]
    if command == "sweep":
        args += ["--ranks", "1", "--seeds", "1", "--steps", "1", "--model", "kernel"]
    assert_error_line(run(*args), needle)


@pytest.mark.parametrize(
    "override, needle",
    [
        ({"position": np.float64("nan")}, "position must be the integer 1, 2 or 3"),
        ({"position": np.float64(1.5)}, "position must be the integer 1, 2 or 3"),
        ({"position": np.array("1")}, "position must be the integer 1, 2 or 3"),
        ({"position": np.bool_(True)}, "position must be the integer 1, 2 or 3"),
        ({"tokens": np.zeros((0, 3, 8), np.uint8)}, "no inputs"),
        ({"tokens": np.zeros((4, 3, 0), np.uint8)}, "tokens must have shape (F, 3, m)"),
        ({"tokens": np.zeros((4, 4, 8), np.uint8)}, "tokens must have shape (F, 3, m)"),
        ({"tokens": np.full((4, 3, 8), 0.5)}, "tokens must be 0/1 integers"),
        ({"tokens": -np.ones((4, 3, 8), np.int8)}, "tokens must hold only 0 and 1"),
    ],
)
def test_malformed_family_arrays(tmp_path, family, override, needle):
    path = _save(tmp_path / "f.npz", family, **override)
    assert_error_line(run("certify", path), needle)


@pytest.mark.parametrize(
    "content, needle",
    [(b"", "not an .npz archive"), (b"hello", "not an .npz archive")],
)
def test_non_npz_files(tmp_path, content, needle):
    path = tmp_path / "f.npz"
    path.write_bytes(content)
    assert_error_line(run("certify", path), needle)


def test_truncated_npz(tmp_path, family):
    path = tmp_path / "f.npz"
    save_family(family, path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    assert_error_line(run("certify", path), "is not a family file")


def test_family_file_declaring_a_huge_array_is_refused_before_loading(tmp_path, family):
    """A few bytes whose header declares 24 GB of tokens (a zip bomb needs only MBs):
    was read with np.load, which allocates what the header says."""
    import io
    import zipfile

    from numpy.lib import format as npy

    good = _save(tmp_path / "good.npz", family)
    path = tmp_path / "bomb.npz"
    header = io.BytesIO()
    npy.write_array_header_1_0(
        header, {"descr": "|u1", "fortran_order": False, "shape": (10**9, 3, 8)}
    )
    with zipfile.ZipFile(good) as src, zipfile.ZipFile(path, "w") as archive:
        for name in src.namelist():
            if name != "tokens.npy":
                archive.writestr(name, src.read(name))
        archive.writestr("tokens.npy", header.getvalue() + b"\0" * 64)
    assert_error_line(run("certify", path), "array tokens of shape (1000000000, 3, 8) would take")
