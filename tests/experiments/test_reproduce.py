import json

import pytest

from sketchsim.experiments.plan import default_plan
from sketchsim.experiments.reproduce import Settings
from sketchsim.runs.reproduce import reproduce

torch = pytest.importorskip("torch", reason="the torch extra is not installed")
torch.set_num_threads(1)


@pytest.mark.slow
def test_reproduce_tiny_settings(tmp_path):
    tiny = Settings(
        witness=default_plan("witness").with_(
            seeds=3, softmax_seeds=3, steps=5, ranks=(1, 9), triples=50
        ),
        ood=default_plan("ood").with_(
            seeds=3, softmax_seeds=3, steps=5, softmax_steps=5, ranks=(1,), scales="4:6:20"
        ),
        samples=200,
        bound_to=8,
    )
    rows = reproduce(tmp_path, quick=True, log=lambda msg: None, device="cpu", settings=tiny)
    by_claim = {r.claim: r for r in rows}
    assert by_claim["certified lower bound on r"].measured == "r >= 9"
    assert by_claim["rank-1 head exact at N = 2"].agrees == "yes"
    assert by_claim["fewer bits than the bound"].agrees == "yes"
    # the committed F(64,7) model measured again at the cut: the row is its file's
    cap = json.loads((tmp_path / "capacity.json").read_text())
    assert cap["rows"][0]["q"] == 64 and cap["rows"][0]["state_basis"] == "readout"
    assert cap["parameters"]["rounding"] == "cut" and cap["parameters"]["samples"] == 200
    (row,) = cap["rows"]
    first = next(c for c in row["curve"] if c["accuracy"] == row["curve"][-1]["accuracy"])
    measured = by_claim["a trained model's transcript against the bound"]
    assert f"from K = {first['bits']} ({first['transcript_bits']} bits" in measured.measured
    assert measured.agrees == "yes: above the bound" and first["transcript_bits"] >= 192
    report = (tmp_path / "report.md").read_text()
    assert report.count("\n| ") == len(rows) + 1  # header + one line per row
    for name in (
        "verify.json",
        "certify.json",
        "sweep_witness.json",
        "sweep_ood.json",
        "transcript.json",
        "bound.json",
        "sweep_witness.png",
        "sweep_ood.png",
        "summary_witness.json",
        "summary_ood.json",
    ):
        assert (tmp_path / name).exists(), name
    assert json.loads((tmp_path / "report.json").read_text())["rows"]
    soft = by_claim["dense softmax on the witness suite"]
    assert "random triples, never on the family" in soft.measured
    witness = json.loads((tmp_path / "sweep_witness.json").read_text())
    assert {r["trained_on"] for r in witness["runs"]} == {"family", "random"}
    assert "family_sha256" in witness["context"]
    ood = json.loads((tmp_path / "sweep_ood.json").read_text())
    # one scale: the slope against m has no interval, and the row says why it is no
    assert ood["trend"][0]["rank"] == 1 and ood["trend"][0]["ci_low"] is None
    ood_row = next(r for r in rows if r.claim.startswith("OOD transition"))
    assert "r = 1: no interval" in ood_row.measured and ood_row.agrees.startswith("NO")
    # a second run resumes both sweeps from their files
    before = json.loads((tmp_path / "sweep_witness.json").read_text())["runs"]
    reproduce(tmp_path, quick=True, log=lambda msg: None, device="cpu", settings=tiny)
    assert json.loads((tmp_path / "sweep_witness.json").read_text())["runs"] == before
    # the resumed report still counts every training run and the time it took
    runs = before + json.loads((tmp_path / "sweep_ood.json").read_text())["runs"]
    seconds = sum(r["seconds"] for r in runs)
    header = (tmp_path / "report.md").read_text().splitlines()[2]
    assert f"the {len(runs)} training runs took {seconds:.0f} s" in header


def test_quick_mode_prints_no_verdict_it_cannot_support(tmp_path):
    """One seed: the rows about every seed and the OOD transition say so instead of YES/NO."""
    quick = Settings.of(quick=True)
    tiny = Settings(
        witness=quick.witness.with_(steps=5, ranks=(1, 9), triples=50),
        ood=quick.ood.with_(steps=5, softmax_steps=5, ranks=(1,), scales="4:6:20"),
        samples=200,
        bound_to=8,
    )
    rows = reproduce(tmp_path, quick=True, log=lambda msg: None, device="cpu", settings=tiny)
    skipped = [r for r in rows if r.measured.startswith("not measured in quick mode")]
    assert {r.claim.split(" (")[0] for r in skipped} == {
        "smallest trained rank exact on every seed",
        "dense softmax on the witness suite",
        "OOD transition point",
        "dense softmax on the OOD suite",
    }
    assert all(r.agrees == "-" and "needs >= 3 seeds" in r.measured for r in skipped)
    assert not (tmp_path / "sweep_ood.json").exists()  # no runs made for rows not shown
    witness = json.loads((tmp_path / "sweep_witness.json").read_text())
    assert {r["spec"]["model"] for r in witness["runs"]} == {"kernel"}
