"""``check-proof``: a valid proof checks; every edited field, and every edit that keeps the
digest but changes what a leaf or the trees say, is invalid (exit 2)."""

import ast
import base64
import copy
import json
import sys

import numpy as np
import pytest
from click.testing import CliRunner
from cliutil import assert_error_line
from weights_files import exact_sum_weights

from sketchsim.api import prove
from sketchsim.cli import main
from sketchsim.prove.check_proof import ProofInvalid, check_proof, leaf_answer
from sketchsim.prove.proof_file import digest
from sketchsim.sketch.family_plugins import make_family

GLA = "docs/capacity/frontier/s7/rebase-kinds/hard-q16-s7-gla-L1-H1-r1-d16-lr0.003-seed0.npz"


@pytest.fixture(scope="module")
def proof(tmp_path_factory):
    folder = tmp_path_factory.mktemp("proof")
    exact_sum_weights(folder / "w.npz", make_family("hard", 4, 7))
    assert prove(folder / "w.npz", 4, "cut", proof_path=folder / "p.json").verdict == "proved"
    return json.loads((folder / "p.json").read_text())


def _check(tmp_path, obj):
    path = tmp_path / "p.json"
    path.write_text(json.dumps(obj))
    return CliRunner().invoke(main, ["check-proof", str(path)])


def _resigned(obj):
    obj = copy.deepcopy(obj)
    obj["digest"] = digest(obj)
    return obj


def test_a_valid_proof_checks(tmp_path, proof):
    res = _check(tmp_path, proof)
    assert res.exit_code == 0, res.output
    assert "VALID" in res.output and "F(4,7)" in res.output
    assert check_proof(proof).leaves == proof["leaves"] == 4 * 8


def test_a_committed_gla_model_proof_checks(tmp_path):
    prove(GLA, 5, "cut", proof_path=tmp_path / "gla.json")
    res = CliRunner().invoke(main, ["check-proof", str(tmp_path / "gla.json")])
    assert res.exit_code == 0, res.output


def _edits(proof):
    """One edit of every field (and of nested ones), the digest left as it was."""
    arr = proof["arrays"]["L0.H0.wv"]
    raw = bytearray(base64.b64decode(arr["f8"]))
    raw[3] ^= 0x40
    yield "format", {**proof, "format": "sketchsim-proof2"}
    yield "version", {**proof, "version": 2}
    yield "claim", {**proof, "claim": "most inputs"}
    yield "weights_sha256", {**proof, "weights_sha256": "0" * 64}
    yield "bits", {**proof, "bits": 5}
    yield "rounding", {**proof, "rounding": "every"}
    yield "family.seed", {**proof, "family": {**proof["family"], "seed": 1}}
    yield "family.q", {**proof, "family": {**proof["family"], "q": 3}}
    yield "perm", {**proof, "perm": [list(reversed(p)) for p in proof["perm"]]}
    yield "architecture", {**proof, "architecture": {**proof["architecture"], "eps": 1e-5}}
    yield "arrays", {**proof, "arrays": {**proof["arrays"], "L0.H0.wv": {
        **arr, "f8": base64.b64encode(bytes(raw)).decode()}}}  # fmt: skip
    yield "trees", {**proof, "trees": [t[::-1] for t in proof["trees"]]}
    yield "leaves", {**proof, "leaves": proof["leaves"] + 1}
    yield "digest", {**proof, "digest": "f" * 64}
    yield "extra field", {**proof, "note": "x"}
    yield "missing field", {k: v for k, v in proof.items() if k != "perm"}


@pytest.mark.parametrize("index", range(16))
def test_any_edited_field_is_invalid(tmp_path, proof, index):
    name, edited = list(_edits(proof))[index]
    assert edited != proof, name
    assert_error_line(_check(tmp_path, edited), "invalid proof")


def test_edits_that_keep_the_digest_are_caught_by_the_leaves_and_the_trees(tmp_path, proof):
    """A tamperer who re-signs: what the leaves say is recomputed, so it still fails."""
    wrong_bits = _resigned({**proof, "bits": 2})  # registers of 3 levels: counts saturate
    broken = copy.deepcopy(proof)
    wv = np.frombuffer(base64.b64decode(broken["arrays"]["L0.H0.wv"]["f8"]), "<f8").copy()
    wv *= 0.5  # the counts halve: wrong answers
    broken["arrays"]["L0.H0.wv"]["f8"] = base64.b64encode(wv.astype("<f8").tobytes()).decode()
    short = copy.deepcopy(proof)
    short["trees"][0] = short["trees"][0][:-1]  # a subtree missing: the family not covered
    outside = copy.deepcopy(proof)
    outside["trees"][1][1] = 7  # a split at the top of its range: an empty half
    unpinned = copy.deepcopy(proof)
    unpinned["trees"][2] = [-1]  # one leaf over the whole family: t_2 not fixed
    fewer = copy.deepcopy(proof)
    fewer["leaves"] -= 1
    perm = copy.deepcopy(proof)
    perm["perm"][0], perm["perm"][1] = perm["perm"][1], perm["perm"][0]  # not inside blocks
    swapped = copy.deepcopy(proof)
    swapped["perm"][0] = swapped["perm"][0][::-1]  # another layout than the seed's
    for obj in (wrong_bits, broken, short, outside, unpinned, fewer, perm, swapped):
        assert_error_line(_check(tmp_path, _resigned(obj)), "invalid proof")


def test_a_leaf_enclosure_is_the_single_answer_at_every_input(proof):
    T = [[1, 2, 3, 4], [0, 0, 0, 0], [7, 7, 7, 7]]
    for t in T:
        for i in range(4):
            assert leaf_answer(proof, i, t, t) == (t[i], t[i])
    lo, hi = leaf_answer(proof, 0, [3, 0, 0, 0], [3, 7, 7, 7])
    assert lo == hi == 3


def test_the_checker_imports_only_the_standard_library():
    import sketchsim.prove.check_proof as mod

    tree = ast.parse(open(mod.__file__).read())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.add(node.module.split(".")[0])
    assert names <= set(sys.stdlib_module_names) | {"__future__"}, names


def test_not_a_proof_file_is_one_line(tmp_path):
    (tmp_path / "x.json").write_text("{not json")
    res = CliRunner().invoke(main, ["check-proof", str(tmp_path / "x.json")])
    assert_error_line(res, "not a readable JSON proof file")
    with pytest.raises(ProofInvalid):
        check_proof({"format": "sketchsim-proof"})


def test_weights_binds_the_proof_to_its_file(tmp_path, proof):
    fam = make_family("hard", 4, 7)
    exact_sum_weights(tmp_path / "w.npz", fam)
    path = tmp_path / "p.json"
    prove(tmp_path / "w.npz", 4, "cut", proof_path=path)
    res = CliRunner().invoke(main, ["check-proof", str(path), "--weights", str(tmp_path / "w.npz")])
    assert res.exit_code == 0, res.output
    proof = json.loads(path.read_text())
    other = exact_sum_weights(tmp_path / "o.npz", fam, bias=19.0)
    assert other.sha256 != proof["weights_sha256"]
    res = CliRunner().invoke(main, ["check-proof", str(path), "--weights", str(tmp_path / "o.npz")])
    assert_error_line(res, "is not the file the proof names")
    # a re-signed proof naming the other file's sha still carries the first file's arrays
    forged = _resigned({**proof, "weights_sha256": other.sha256})
    path.write_text(json.dumps(forged))
    res = CliRunner().invoke(main, ["check-proof", str(path), "--weights", str(tmp_path / "o.npz")])
    assert_error_line(res, "differs from")


def test_a_retention_proof_checks(tmp_path):
    """A kind added through the registry (#62) is proved and its proof checks (rounded at
    the cut: re-rounding every query's state loses the decayed counts' fractions, and the
    same model is refuted with rounding every)."""
    from sketchsim.prove.examples import retention_counting_model
    from sketchsim.sketch.weights_file import save_weights_file

    fam = make_family("hard", 8, 3)
    save_weights_file(tmp_path / "r.npz", *retention_counting_model(fam, 4))
    out = prove(tmp_path / "r.npz", 4, "cut", proof_path=tmp_path / "p.json")
    assert out.verdict == "proved"
    assert prove(tmp_path / "r.npz", 4, "every").verdict == "refuted"
    res = CliRunner().invoke(main, ["check-proof", str(tmp_path / "p.json")])
    assert res.exit_code == 0 and "retention" in res.output, res.output
