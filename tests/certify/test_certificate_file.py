"""Certificates a referee can check: the proof file, its independent checker, tampering."""

import copy
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from sketchsim.certify import build_witness, certify
from sketchsim.certify.check import CertificateInvalid, CertificateMalformed, check_certificate
from sketchsim.certify.codes import hadamard_code
from sketchsim.certify.proof import certificate_proof
from sketchsim.cli import main

CHECKER = Path(__file__).resolve().parents[2] / "sketchsim" / "certify" / "check.py"


@pytest.fixture(scope="module")
def proof():
    """The default witness family (m = 24, 408 inputs) and its proof at eps -> 1/2."""
    family = build_witness(hadamard_code(24), "hadamard", 12)
    return family, certificate_proof(family)


def test_the_checker_proves_what_the_certificate_claims(proof):
    family, data = proof
    checked = check_certificate(data)
    assert checked.rank == certify(family, eps_list=()).certified_rank["0.5"] == 9
    assert str(checked.bound) == "25/3"  # 144 / 17.28, THEORY section 4's worked example
    assert checked.pairs == 12 and checked.chains == 12 * 11 and checked.strict


@pytest.mark.parametrize("positional", [True, False])
@pytest.mark.parametrize("chains", [False, True])
def test_small_families_check_with_and_without_chains(positional, chains):
    family = build_witness(hadamard_code(12), "hadamard", 6, chains=chains)
    data = certificate_proof(family, positional=positional)
    checked = check_certificate(json.loads(json.dumps(data)))
    want = certify(family, eps_list=(), positional=positional).certified_rank["0.5"]
    assert checked.rank == want
    if chains:
        assert max(len(c["path"]) for c in data["chains"]) >= 2


def _tampered(data, edit):
    bad = copy.deepcopy(data)
    edit(bad)
    return bad


def _drop_mixed_input(d):
    """Remove one mixed input that a chain step needs."""
    p = d["position"] - 1
    chain = d["chains"][0]
    x = d["pairs"][chain["row"]][0]
    u, w = chain["path"][0], chain["path"][1]
    for k, triple in enumerate(d["inputs"]):
        others = [triple[i] for i in range(3) if i != p]
        if triple[p] == x and others == [u, w]:
            del d["inputs"][k]
            return
    raise AssertionError("no mixed input found")


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (lambda d: d["chains"][0]["path"].__setitem__(-1, d["pairs"][2][1]), "not from pair"),
        (lambda d: d["chains"][5]["path"].insert(1, d["pairs"][7][0]), "step 0"),
        (lambda d: d["pairs"][3].__setitem__(1, d["pairs"][3][0]), "self input"),
        (lambda d: d["pairs"][4].__setitem__(1, d["pairs"][5][1]), "share a candidate"),
        (_drop_mixed_input, "not in the family"),
        (lambda d: d["chains"].pop(), "no chain for row"),
        (lambda d: d["claimed"].__setitem__("certified_rank", 10), "claims r >= 10"),
        (lambda d: d.__setitem__("eps", "1/3"), "eps must be in"),
    ],
)
def test_a_tampered_certificate_is_rejected_at_its_first_bad_step(proof, edit, needle):
    _, data = proof
    with pytest.raises((CertificateInvalid, CertificateMalformed), match=needle):
        check_certificate(_tampered(data, edit))


def test_the_cli_writes_and_checks_a_certificate_without_numba(tmp_path):
    family_file, cert = tmp_path / "w.npz", tmp_path / "cert.json"
    runner = CliRunner()
    assert runner.invoke(main, ["witness", "--out", str(family_file)]).exit_code == 0
    res = runner.invoke(main, ["certify", str(family_file), "--certificate", str(cert)])
    assert res.exit_code == 0, res.output
    code = (
        "import sys\nfrom sketchsim.cli import main\n"
        f"try:\n    main(['check-certificate', {str(cert)!r}])\nexcept SystemExit as e:\n"
        "    assert e.code in (0, None), e.code\n"
        "assert 'numba' not in sys.modules, 'the checker loaded numba'\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "r >= 9" in out.stdout and "25/3" in out.stdout
    data = json.loads(cert.read_text())
    data["chains"][0]["path"][-1] = data["pairs"][1][1] if data["chains"][0]["col"] != 1 else 0
    cert.write_text(json.dumps(data))
    res = runner.invoke(main, ["check-certificate", str(cert)])
    assert res.exit_code == 1 and "REJECTED:" in res.output
    cert.write_text("{}")
    res = runner.invoke(main, ["check-certificate", str(cert)])
    assert res.exit_code == 2 and "not a sketchsim-certificate/1 file" in res.output


def test_the_checker_runs_alone_on_the_standard_library(proof, tmp_path):
    """A referee copies check.py and runs it without sketchsim, numpy or site-packages."""
    _, data = proof
    alone = tmp_path / "check.py"
    shutil.copy(CHECKER, alone)
    cert = tmp_path / "cert.json"
    cert.write_text(json.dumps(data))
    out = subprocess.run(
        [sys.executable, "-I", "-S", str(alone), str(cert)], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "valid: r >= 9 (bound 25/3, 12 pairs)"


def test_a_deeply_nested_file_is_one_line(tmp_path):
    from cliutil import assert_error_line

    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    res = CliRunner().invoke(main, ["check-certificate", str(deep)])
    assert_error_line(res, "deep.json")


def _swap_tokens(d, i, j):
    d["tokens"][i], d["tokens"][j] = d["tokens"][j], d["tokens"][i]


def test_the_family_hash_is_recomputed_from_tokens_and_inputs(proof):
    """Issue #33: a certificate whose tokens were reordered, hash left as it was, was
    accepted ("valid ... r >= 9"); the checker now recomputes family_sha256."""
    from sketchsim.certify.check import family_sha256

    family, data = proof
    assert family_sha256(data["tokens"], data["inputs"], data["position"]) == family.sha256()
    assert check_certificate(data).rank == 9  # untouched: valid
    # swapping the first and last token keeps every chain step valid: only the hash sees it
    bad = _tampered(data, lambda d: _swap_tokens(d, 0, len(d["tokens"]) - 1))
    with pytest.raises(CertificateInvalid, match="family_sha256 .* is not the family"):
        check_certificate(bad)
    with pytest.raises(CertificateInvalid, match="family_sha256"):  # the hash itself edited
        check_certificate(_tampered(data, lambda d: d.__setitem__("family_sha256", "0" * 64)))
    with pytest.raises(CertificateMalformed, match="family_sha256"):
        check_certificate(_tampered(data, lambda d: d.pop("family_sha256")))


def test_renumbering_the_token_table_keeps_the_family_and_its_hash(proof):
    """The hash covers the family (tokens of every input in order), not the table's order."""
    _, data = proof
    n = len(data["tokens"])
    perm = list(range(n))[::-1]  # old index -> new index

    def renumber(d):
        d["tokens"] = [d["tokens"][perm.index(k)] for k in range(n)]
        d["inputs"] = [[perm[i] for i in t] for t in d["inputs"]]
        d["pairs"] = [[perm[i] for i in p] for p in d["pairs"]]
        for c in d["chains"]:
            c["path"] = [perm[i] for i in c["path"]]

    assert check_certificate(_tampered(data, renumber)).rank == 9


def test_the_cli_rejects_a_reordered_certificate(proof, tmp_path):
    _, data = proof
    cert = tmp_path / "cert.json"
    cert.write_text(json.dumps(data))
    res = CliRunner().invoke(main, ["check-certificate", str(cert)])
    assert res.exit_code == 0 and "r >= 9" in res.output
    cert.write_text(json.dumps(_tampered(data, lambda d: _swap_tokens(d, 0, 23))))
    res = CliRunner().invoke(main, ["check-certificate", str(cert)])
    assert res.exit_code == 1 and "REJECTED: family_sha256" in res.output


@pytest.mark.parametrize("m", [8, 12, 16])
def test_the_committed_bound_proofs_are_the_ones_the_bound_run_recorded(m):
    """docs/bound/bound_m8_20_certificates.json is the result of `bound --export
    --certificates` (not a certificate itself); the proof files it names for the
    committed families are committed beside them, byte for byte, and check."""
    import hashlib

    from sketchsim.certify.check import load_certificate
    from sketchsim.certify.witness import load_family

    folder = Path(__file__).resolve().parents[2] / "docs" / "bound"
    run = json.loads((folder / "bound_m8_20_certificates.json").read_text())
    (row,) = [r["realized"] for r in run["rows"] if r["m"] == m]
    cert = folder / row["certificate"]["file"]
    assert hashlib.sha256(cert.read_bytes()).hexdigest() == row["certificate"]["file_sha256"]
    checked = check_certificate(load_certificate(cert))
    assert checked.rank == row["certificate"]["checked_rank"] == row["certified_rank"]
    assert str(checked.bound) == row["certificate"]["checked_bound"]
    family = load_family(folder / row["file"])
    assert json.loads(cert.read_text())["family_sha256"] == family.sha256() == row["family_sha256"]
