"""A certificate's claimed bound must be the bound its proof establishes (#47)."""

import json

import pytest
from click.testing import CliRunner
from cliutil import assert_error_line

from sketchsim.certify import build_witness
from sketchsim.certify.check import CertificateInvalid, check_certificate
from sketchsim.certify.codes import hadamard_code
from sketchsim.certify.proof import certificate_proof
from sketchsim.cli import main


@pytest.fixture(scope="module")
def proof():
    """A small witness family's certificate as its JSON object."""
    family = build_witness(hadamard_code(12), "hadamard", 6)
    return json.loads(json.dumps(certificate_proof(family)))


def _check(tmp_path, data):
    path = tmp_path / "cert.json"
    path.write_text(json.dumps(data))
    return CliRunner().invoke(main, ["check-certificate", str(path)])


def test_an_unedited_certificate_is_still_valid(proof, tmp_path):
    checked = check_certificate(proof)
    assert proof["claimed"]["bound"] == pytest.approx(float(checked.bound), rel=1e-12)
    res = _check(tmp_path, proof)
    assert res.exit_code == 0, res.output
    assert res.output.startswith("valid:") and f"bound {checked.bound} =" in res.output


@pytest.mark.parametrize("scale", [2, 0.5, 1 + 1e-6])
def test_an_edited_claimed_bound_is_rejected_in_one_line(proof, tmp_path, scale):
    proved = check_certificate(proof).bound
    edited = {**proof, "claimed": {**proof["claimed"], "bound": proof["claimed"]["bound"] * scale}}
    with pytest.raises(CertificateInvalid, match="differs from the proved bound"):
        check_certificate(edited)
    res = _check(tmp_path, edited)
    assert res.exit_code == 1 and "Traceback" not in res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert lines == [
        f"REJECTED: the claimed bound {edited['claimed']['bound']!r} differs from the proved "
        f"bound {proved} (= {float(proved):.12g})"
    ]


def test_a_float_rounding_of_the_bound_is_not_an_edit(proof):
    bound = proof["claimed"]["bound"]
    check_certificate({**proof, "claimed": {**proof["claimed"], "bound": bound * (1 + 1e-12)}})


def test_a_claimed_bound_that_is_not_a_number_is_malformed(proof, tmp_path):
    res = _check(tmp_path, {**proof, "claimed": {**proof["claimed"], "bound": "9"}})
    assert_error_line(res, "claimed bound '9' is not a number")
