"""``sketchsim bound --export``: every reported family is built, written and certified."""

import hashlib
import json

import numpy as np
import pytest
from click.testing import CliRunner
from cliutil import assert_error_line

from sketchsim.certify import certify, load_family
from sketchsim.certify import realize as realize_mod
from sketchsim.certify.bounds import best_bound, code_bound, code_bound_words, row_words
from sketchsim.certify.codes import greedy_code, hadamard_code
from sketchsim.certify.packed import PackedFamily, load_any_family
from sketchsim.certify.realize import realize_row
from sketchsim.cli import main


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def sha(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_code_bound_words_names_the_kept_words():
    code = greedy_code(12, 4, 6)  # mixes unbounded gap-2 entries: pairs are dropped
    res = code_bound_words(code)
    assert 0 < res.pairs < len(code) and res.keep.size == res.pairs
    assert (res.value, res.pairs, res.certified_rank) == code_bound(code)
    again = code_bound_words(code[res.keep])  # the kept words alone keep themselves
    assert again.pairs == res.pairs and again.value == pytest.approx(res.value)


def test_row_words_rebuild_the_rows_code():
    row = best_bound(16)
    words, res = row_words(row)
    assert words.shape == (row.pairs, 16) and res.certified_rank == row.certified_rank


def test_export_small_widths_realize_the_claim(tmp_path):
    out = tmp_path / "export"
    res = run(
        "bound", "--m", 8, "--to", 16, "--step", 4, "--export", out, "--certificates",
        "--json", out / "bound.json",
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    data = json.loads((out / "bound.json").read_text())
    assert data["all_realized"] and data["parameters"]["export"].endswith("export")
    for row in data["rows"]:
        real = row["realized"]
        assert real["status"] == "equal"
        assert real["certified_rank"] == row["certified_rank"] == real["claimed_rank"]
        assert real["bound"] == pytest.approx(row["bound"], rel=1e-12)
        assert real["pairs"] == row["pairs"] and real["format"] == "tokens"
        path = out / real["file"]
        assert sha(path) == real["file_sha256"]
        family = load_family(path)  # the file round-trips
        assert family.sha256() == real["family_sha256"] and len(family.tokens) == real["inputs"]
        assert certify(family, eps_list=()).certified_rank["0.5"] == real["certified_rank"]
        proof = out / real["certificate"]["file"]
        assert real["certificate"]["checked_rank"] == real["certified_rank"]
        checked = run("check-certificate", proof)
        assert checked.exit_code == 0 and f"r >= {real['certified_rank']}" in checked.output


def test_export_packed_family_is_the_token_family(tmp_path, monkeypatch):
    """Past the in-memory limit the family is packed; m = 12 has no random chain tokens,
    so the packed family is build_witness's, hash for hash."""
    tokens = realize_row(best_bound(12), tmp_path / "tokens")
    monkeypatch.setattr(realize_mod, "WITNESS_MAX_INPUTS", 10)
    packed = realize_row(best_bound(12), tmp_path / "packed", proof=True)
    assert (tokens.format, packed.format) == ("tokens", "packed")
    assert packed.family_sha256 == tokens.family_sha256 and packed.status == "equal"
    assert packed.certificate["checked_rank"] == packed.certified_rank
    path = tmp_path / "packed" / packed.file
    assert isinstance(load_any_family(path), PackedFamily)
    res = run("certify", path, "--certificate", tmp_path / "c.json")
    assert res.exit_code == 0, res.output
    assert json.loads((tmp_path / "c.json").read_text())["claimed"]["certified_rank"] == 4


def test_a_family_below_its_claim_is_shown_and_fails(tmp_path, monkeypatch):
    real_certify = realize_mod.certify

    def weaker(family, eps_list=()):
        cert = real_certify(family, eps_list)
        cert.certified_rank["0.5"] -= 1
        return cert

    monkeypatch.setattr(realize_mod, "certify", weaker)
    out = tmp_path / "e"
    res = run("bound", "--m", 12, "--export", out, "--json", out / "b.json")
    assert res.exit_code == 1 and "MISMATCH" in res.output
    data = json.loads((out / "b.json").read_text())
    assert not data["all_realized"] and data["rows"][0]["realized"]["status"] == "below"


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--m", 8, "--to", 36], "--to must be <= 32 with export"),
        (["--m", 36], "--m must be <= 32 with export"),
    ],
)
def test_export_refuses_wide_m(tmp_path, args, needle):
    res = run("bound", *args, "--export", tmp_path / "e")
    assert_error_line(res, needle)
    assert not list((tmp_path / "e").glob("*.npz"))


def test_export_refuses_an_unwritable_folder(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert_error_line(run("bound", "--m", 8, "--export", blocker / "sub"), "not a directory")


def test_certificates_need_export():
    assert_error_line(run("bound", "--m", 8, "--certificates"), "--certificates needs --export")


def test_witness_packed_beyond_1024_words(tmp_path):
    out = tmp_path / "w.npz"
    res = run(
        "witness", "--m", 24, "--code", "random", "--d", 4, "--codewords", 1100,
        "--no-both-orders", "--packed", "--out", out, "--json", tmp_path / "w.json",
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    data = json.loads((tmp_path / "w.json").read_text())
    assert data["codewords"] == 1100 and data["packed"] and data["inputs"] == 1100 * 2199
    family = load_any_family(out)
    assert family.inputs == data["inputs"] and family.sha256() == data["family_sha256"]


def test_witness_packed_small(tmp_path):
    out = tmp_path / "w.npz"
    res = run("witness", "--m", 12, "--complements", "--codewords", 0, "--chains", "--packed",
              "--out", out, "--json", tmp_path / "w.json")  # fmt: skip
    assert res.exit_code == 0, res.output
    data = json.loads((tmp_path / "w.json").read_text())
    tokens = run("witness", "--m", 12, "--complements", "--codewords", 0, "--chains",
                 "--out", tmp_path / "t.npz", "--json", tmp_path / "t.json")  # fmt: skip
    assert tokens.exit_code == 0, tokens.output
    same = json.loads((tmp_path / "t.json").read_text())
    assert data["family_sha256"] == same["family_sha256"]
    assert data["certified_rank"] == same["certified_rank"]


def test_witness_in_memory_limit_points_to_packed(tmp_path, monkeypatch):
    res = run("witness", "--code", "golay-dodecads", "--codewords", 0, "--out", tmp_path / "w.npz")
    assert_error_line(res, "--packed")


def test_words_of_hadamard_rows_are_kept_whole():
    words, res = row_words(best_bound(12))
    assert np.array_equal(np.sort(words, axis=0), np.sort(hadamard_code(12, True), axis=0))
    assert res.pairs == 22
