"""reproduce's non-trained steps are calls to the runs (#46): their files hold what the
direct calls to the engine, the certificate and best_bound gave before."""

import json
from dataclasses import asdict

from sketchsim.runs import reproduce as rep


class _Cfg:
    samples = 200
    bound_to = 12


def _no_seconds(x):
    if isinstance(x, dict):
        return {k: _no_seconds(v) for k, v in x.items() if k != "seconds"}
    if isinstance(x, list):
        return [_no_seconds(v) for v in x]
    return x


def test_transcript_json_is_what_measure_gives(tmp_path):
    from sketchsim.sketch import HardFamily
    from sketchsim.sketch.measure import DEFAULT_SPECS, measure
    from sketchsim.sketch.plugins import discover, resolve_spec

    rows = rep._transcripts(tmp_path, _Cfg, lambda msg: None)
    found = discover()
    fam = HardFamily(64, 7, 0)
    T = fam.sample_answers(_Cfg.samples)
    direct = {}
    for spec in ("block-counts", "clipped-counts"):
        proto, params, _ = resolve_spec(spec, found)
        direct[spec] = measure(fam, T, proto, params).to_dict()
    small = HardFamily(6, 7, 0)
    proto, params, _ = resolve_spec("clipped-counts", found)
    ex = measure(small, small.all_answers(), proto, params).to_dict()
    expected = {"q64_s7": direct, "q6_s7_exhaustive": ex, "default_specs": list(DEFAULT_SPECS)}
    written = json.loads((tmp_path / "transcript.json").read_text())
    assert list(written) == list(expected)
    assert _no_seconds(written) == _no_seconds(json.loads(json.dumps(expected)))
    assert [r.agrees.split(" ")[0] for r in rows] == ["yes", "yes"]


def test_bound_json_is_what_best_bound_gives(tmp_path):
    from sketchsim.certify.bounds import best_bound, fit_growth

    (row,) = rep._bound(tmp_path, _Cfg, lambda msg: None)
    expected = [best_bound(m) for m in (8, 12)]
    written = json.loads((tmp_path / "bound.json").read_text())
    assert written == json.loads(json.dumps({"rows": [asdict(r) for r in expected]}))
    slope = fit_growth([8, 12], [r.certified_rank for r in expected])["slope"]
    assert f"log2 r fit: {slope:.2f} per bit" in row.measured


def test_certify_json_is_what_certify_gives(tmp_path):
    from sketchsim.certify import build_witness, certify
    from sketchsim.certify.codes import hadamard_code

    family, rows, bound = rep._certificate(tmp_path, lambda msg: None)
    expected = certify(build_witness(hadamard_code(24), "hadamard", 12)).to_dict()
    assert json.loads((tmp_path / "certify.json").read_text()) == json.loads(json.dumps(expected))
    assert bound == expected["certified_rank"]["0.5"]
    assert rows[1].measured == f"r >= {bound}"
