"""``witness`` and ``certify`` as library runs (#46): the API and the CLI write the same files,
and the CLI only parses, calls the run and renders."""

import json

import pytest
from click.testing import CliRunner

from sketchsim import api
from sketchsim.cli import main
from sketchsim.errors import SketchsimError
from sketchsim.runs.certify import CertifyPlan
from sketchsim.runs.certify import run as run_certify
from sketchsim.runs.witness import WitnessPlan


def _result(path) -> dict:
    return json.loads(path.read_text())


def _cli(*args) -> None:
    res = CliRunner().invoke(main, [str(a) for a in args])
    assert res.exit_code == 0, res.output


@pytest.mark.parametrize(
    "packed, extra",
    [(False, {}), (True, {"chains": True, "codewords": 0})],
    ids=["family", "packed"],
)
def test_witness_api_and_cli_write_the_same_files(tmp_path, packed, extra):
    out, api_json, cli_json = tmp_path / "w.npz", tmp_path / "api.json", tmp_path / "cli.json"
    args = {"m": 8, "codewords": 4, "packed": packed, **extra}
    got = api.witness(out=str(out), json_path=api_json, **args)
    family_bytes = out.read_bytes()
    flags = ["--m", 8, "--codewords", args["codewords"], "--out", out, "--json", cli_json]
    _cli("witness", *flags, *(["--packed"] if packed else []), *(["--chains"] if extra else []))
    assert api_json.read_bytes() == cli_json.read_bytes()  # one process: the same argv too
    assert out.read_bytes() == family_bytes
    data = _result(cli_json)
    assert data["certified_rank"] == got.certificate.certified_rank
    assert data["inputs"] == got.inputs and got.certified_rank == data["certified_rank"]["0.5"]
    assert data["parameters"]["packed"] is packed


@pytest.mark.parametrize(
    "eps, position_independent, packed",
    [((0.4, 0.1, 0.4), False, False), ((), True, True)],
    ids=["eps-as-given", "packed-position-independent"],
)
def test_certify_api_and_cli_write_the_same_files(tmp_path, eps, position_independent, packed):
    fam = tmp_path / "w.npz"
    api.witness(m=8, codewords=4, out=str(fam), packed=packed)
    api_json, cli_json = tmp_path / "api.json", tmp_path / "cli.json"
    api_proof, cli_proof = tmp_path / "api.cert.json", tmp_path / "cli.cert.json"
    cert = api.certify(
        str(fam),
        eps or None,
        positional=not position_independent,
        json_path=api_json,
        proof_path=api_proof,
    )
    flags = [f for e in eps for f in ("--eps", e)]
    flags += ["--position-independent"] if position_independent else []
    _cli("certify", fam, *flags, "--json", cli_json, "--certificate", cli_proof)
    assert api_json.read_bytes() == cli_json.read_bytes()
    assert api_proof.read_bytes() == cli_proof.read_bytes()
    data = _result(cli_json)
    assert data["certified_rank"] == cert.certified_rank
    assert data["parameters"]["eps"] == list(eps or (0.1, 0.25, 0.4, 0.49))  # as given
    levels = sorted(set(eps or (0.1, 0.25, 0.4, 0.49)))
    assert list(cert.certified_rank) == ["0.5", *(f"{e:g}" for e in levels)]  # sorted, once
    _cli("check-certificate", cli_proof)


def test_a_family_in_memory_is_certified_as_its_file(tmp_path):
    from sketchsim.certify.packed import load_any_family

    fam = tmp_path / "w.npz"
    api.witness(m=8, codewords=4, out=str(fam))
    from_file = run_certify(CertifyPlan(str(fam)), json_path=tmp_path / "f.json")
    in_memory = run_certify(CertifyPlan(load_any_family(fam)), json_path=tmp_path / "m.json")
    assert in_memory.to_dict() == from_file.to_dict()
    assert _result(tmp_path / "m.json")["parameters"]["path"] is None
    assert in_memory.proof is None


@pytest.mark.parametrize(
    "plan, needle",
    [
        (WitnessPlan(codewords=-1), "--codewords must be >= 0"),
        (WitnessPlan(seed=-1), "--seed must be in"),
        (WitnessPlan(code="greedy", complements=True), "--complements applies to hadamard"),
        (WitnessPlan(code="golay-octads", d=4), "has its own minimum distance"),
    ],
)
def test_witness_plans_are_refused_before_any_work(plan, needle):
    with pytest.raises(SketchsimError, match=needle):
        plan.validate()


def test_an_eps_out_of_range_is_refused_before_the_family_is_read(tmp_path):
    with pytest.raises(SketchsimError, match=r"eps must be in \(0, 1/2\), got 0.5"):
        run_certify(CertifyPlan(tmp_path / "no-such.npz", (0.1, 0.5)))
