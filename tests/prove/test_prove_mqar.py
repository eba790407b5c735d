"""``prove`` on MQAR: a superset family for one-layer sum-state models rounded at the cut."""

import json

import numpy as np
import pytest
from click.testing import CliRunner
from cliutil import assert_error_line
from weights_files import random_causal_weights

from sketchsim.cli import main
from sketchsim.prove.examples import lookup_model
from sketchsim.prove.search import engine_answers, prove
from sketchsim.sketch.family_plugins import make_family
from sketchsim.sketch.weights_file import load_weights, save_weights_file


def _mqar(q, s, keys, pairs):
    return make_family("mqar", q, s, 0, {"keys": keys, "pairs": pairs})


@pytest.mark.parametrize("q, keys, pairs", [(2, 6, 4), (8, 64, 16), (64, 256, 128)])
def test_a_lookup_model_is_proved(tmp_path, q, keys, pairs):
    fam = _mqar(q, 3, keys, pairs)
    save_weights_file(tmp_path / "m.npz", *lookup_model(fam, 12))
    w = load_weights(tmp_path / "m.npz")
    out = prove(w, fam, 12, "cut")
    assert out.verdict == "proved" and out.leaves == q * 4
    if q <= 8:  # the family itself: every input right
        T = fam.all_answers()
        assert (engine_answers(w, fam, 12, "cut", T) == T).all()


def test_perturbed_lookup_models_are_never_proved_when_wrong(tmp_path):
    """Proved on the superset means right on every input of the family, enumerated here;
    refuted means an input of the family the engine answers wrong."""
    fam = _mqar(2, 3, 6, 4)
    header, base = lookup_model(fam, 8, alpha=10.0)
    rng = np.random.default_rng(0)
    seen = {"proved": 0, "refuted": 0, "unknown": 0}
    T = fam.all_answers()
    for k in range(60):
        scale = [0.0, 0.1, 0.3, 1.0][k % 4]
        arrays = {n: a + (scale * rng.normal(size=a.shape) if "span" not in n and "lo" not in n
                          else 0) for n, a in base.items()}  # fmt: skip
        save_weights_file(tmp_path / "p.npz", header, arrays)
        w = load_weights(tmp_path / "p.npz")
        out = prove(w, fam, 8, "cut", budget=20)
        wrong = (engine_answers(w, fam, 8, "cut", T) != T).any()
        seen[out.verdict] += 1
        if out.verdict == "proved":
            assert not wrong, k
        if out.verdict == "refuted":
            got = engine_answers(w, fam, 8, "cut", np.array([out.counterexample]))
            assert (got != np.array([out.counterexample])).any()
    assert seen["proved"] > 5 and seen["refuted"] > 5, seen


def test_what_mqar_does_not_cover_is_refused(tmp_path):
    fam = _mqar(2, 3, 6, 4)
    random_causal_weights(tmp_path / "g.npz", fam, "gla", 1, 1, 2, 2)
    save_weights_file(tmp_path / "m.npz", *lookup_model(fam, 12))
    run = CliRunner().invoke
    assert_error_line(run(main, ["prove", str(tmp_path / "g.npz"), "--bits", "4"]),
                      "prove covers MQAR for one-layer linear and based")  # fmt: skip
    assert_error_line(run(main, ["prove", str(tmp_path / "m.npz"), "--bits", "12"]),
                      "rounding every")  # fmt: skip
    res = run(main, ["prove", str(tmp_path / "m.npz"), "--bits", "12", "--rounding", "cut",
                     "--proof", str(tmp_path / "p.json")])  # fmt: skip
    assert_error_line(res, "proof files cover F(q, s)")
    res = run(main, ["prove", str(tmp_path / "m.npz"), "--bits", "12", "--rounding", "cut",
                     "--json", str(tmp_path / "r.json")])  # fmt: skip
    assert res.exit_code == 0, res.output
    out = json.loads((tmp_path / "r.json").read_text())
    assert out["verdict"] == "proved" and out["family"]["name"] == "mqar"
    assert out["family"]["pairs"] == 4
