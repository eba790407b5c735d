"""``prove``: the interval forward encloses the engine, and the verdict is enumeration's."""

import numpy as np
import pytest
from naive import causal_outputs
from weights_files import exact_sum_weights, random_causal_weights

from sketchsim.minip.bits import unpack_bits
from sketchsim.prove.forward import BoxModel
from sketchsim.prove.interval import Iv, dot
from sketchsim.prove.search import engine_answers, prove
from sketchsim.sketch.family_plugins import make_family
from sketchsim.sketch.weights_file import load_weights, save_weights_file, weights_family

KINDS = [("linear", "elu1"), ("linear", "elu1sum"), ("linear", "relu"), ("linear", "signed"),
         ("linear", "softplus"), ("based", "elu1"), ("gla", "elu1"), ("deltanet", "elu1"),
         ("gated-deltanet", "elu1"), ("mamba", "elu1"), ("window", "elu1"),
         ("retention", "elu1")]  # fmt: skip
REBASE = "docs/capacity/frontier/s7/elu1sum/rebase"
Q4 = f"{REBASE}/hard-q4-s7-linear-elu1sum-L1-H1-r1-d4-lr0.003-seed0.npz"


def _wrong_anywhere(w, fam, bits, rounding):
    T = fam.all_answers()
    return bool((engine_answers(w, fam, bits, rounding, T) != T).any())


@pytest.mark.parametrize("kind,fmap", KINDS)
@pytest.mark.parametrize("layers", [1, 2])
def test_the_enclosure_holds_every_input_and_is_tight_at_a_point(tmp_path, kind, fmap, layers):
    fam = make_family("hard", 3, 2)
    w = random_causal_weights(tmp_path / "w.npz", fam, kind, layers, 2, 2, 3, fmap=fmap, window=2)
    T = fam.all_answers().astype(np.int64)
    X = unpack_bits(fam.tokens(T), fam.m)
    for rounding in ("every", "cut"):
        for bits in (3, 8):
            _, codes, ans = causal_outputs(w, X, bits, rounding=rounding)
            model = BoxModel(w, fam.perm, bits, rounding)
            cut = model.cut(T, T)
            assert ((cut.code_lo <= codes) & (codes <= cut.code_hi)).all()
            lo, hi = model.answers(cut.states, fam.q - 1)
            assert ((lo <= ans) & (ans <= hi)).all()
            assert (lo == hi).mean() > 0.95  # a single input's enclosure decides it
            whole = model.cut(np.zeros((1, fam.q), np.int64), np.full((1, fam.q), fam.s))
            lo, hi = model.answers(whole.states, fam.q - 1)
            assert ((lo <= ans.min(0)) & (ans.max(0) <= hi)).all()


def test_interval_operations_enclose_every_float_inside():
    rng = np.random.default_rng(0)
    for _ in range(200):
        a, b = np.sort(rng.normal(0, 3, (2, 5)), axis=0)
        c, d = np.sort(rng.normal(0, 3, (2, 5)), axis=0)
        x, y = Iv(a, b), Iv(c, d)
        t = rng.uniform(size=(64, 1))
        px, py = a + t * (b - a), c + t * (d - c)
        W = rng.normal(size=(3, 5))
        pairs = [(x + y, px + py), (x - y, px - py), (x * y, px * py), (x / y, px / py),
                 (x.square(), px * px), (x.monotone(np.exp), np.exp(px)),
                 (x.sum(axis=0), px.sum(axis=1))]  # fmt: skip
        for got, want in pairs:
            lo = np.where(np.isnan(got.lo), -np.inf, got.lo)
            assert (lo <= want).all() and (want <= got.hi).all()
        got = dot(W, x, 1.5)
        want = 1.5 + px @ W.T
        assert (got.lo <= want).all() and (want <= got.hi).all()


def test_a_committed_model_is_proved_or_refuted_as_enumeration_says():
    w = load_weights(Q4)
    fam = weights_family(w)
    for bits in (3, 4, 5):
        out = prove(w, fam, bits, "cut")
        wrong = _wrong_anywhere(w, fam, bits, "cut")
        assert out.verdict == ("refuted" if wrong else "proved"), bits
    assert prove(w, fam, 4, "cut").verdict == "proved"


def test_hundreds_of_perturbed_models_get_enumerations_verdict(tmp_path):
    base = load_weights(Q4)
    fam = weights_family(base)
    rng = np.random.default_rng(1)
    seen = {"proved": 0, "refuted": 0}
    for k in range(120):
        scale = [0.0, 0.01, 0.03, 0.1][k % 4]
        arrays = {n: a + (scale * rng.normal(size=a.shape) * np.abs(a).mean()
                          if n.split(".")[-1] not in ("lo", "span") else 0)
                  for n, a in base.arrays.items()}  # fmt: skip
        save_weights_file(tmp_path / "p.npz", base.header, arrays)
        w = load_weights(tmp_path / "p.npz")
        bits, rounding = (3, 4, 5)[k % 3], ("cut", "every")[k % 2]
        out = prove(w, fam, bits, rounding, budget=30)
        wrong = _wrong_anywhere(w, fam, bits, rounding)
        assert out.verdict == ("refuted" if wrong else "proved"), (k, out)
        seen[out.verdict] += 1
    assert seen["proved"] > 10 and seen["refuted"] > 10


@pytest.mark.parametrize("kind,fmap", KINDS)
def test_random_models_of_every_kind_get_enumerations_verdict(tmp_path, kind, fmap):
    fam = make_family("hard", 2, 3)
    for seed in range(6):
        w = random_causal_weights(tmp_path / f"w{seed}.npz", fam, kind, 1 + seed % 2, 1, 2, 2,
                                  fmap=fmap, window=2, seed=seed)  # fmt: skip
        for bits, rounding in [(2, "every"), (6, "cut")]:
            out = prove(w, fam, bits, rounding, budget=30, corners=seed % 2 == 0)
            wrong = _wrong_anywhere(w, fam, bits, rounding)
            assert out.verdict in (("refuted",) if wrong else ("proved", "unknown")), out
            if out.verdict == "refuted":
                T = np.array([out.counterexample])
                assert (engine_answers(w, fam, bits, rounding, T) != T).any()


@pytest.mark.parametrize("q", [4, 16])
def test_a_model_wrong_on_one_input_is_never_proved(tmp_path, q):
    """Wrong only where every t_i = s: one input in 8^q (2.8e14 at q = 16)."""
    fam = make_family("hard", q, 7)
    w = exact_sum_weights(tmp_path / "w.npz", fam, drop=40.0)
    if q == 4:
        T = fam.all_answers()
        wrong = (engine_answers(w, fam, 4, "cut", T) != T).any(axis=1)
        assert wrong.sum() == 1 and (T[wrong] == 7).all()
    for corners in (True, False):
        out = prove(w, fam, 4, "cut", budget=60, corners=corners)
        assert out.verdict == "refuted" and out.counterexample == [7] * q


@pytest.mark.parametrize("q", [4, 16])
def test_a_model_built_right_is_proved(tmp_path, q):
    fam = make_family("hard", q, 7)
    w = exact_sum_weights(tmp_path / "w.npz", fam)
    for rounding in ("cut", "every"):
        out = prove(w, fam, 4, rounding)
        assert out.verdict == "proved" and len(out.trees) == q
        assert out.leaves == q * 8  # one leaf per answer value of each query


@pytest.mark.slow
def test_a_model_built_right_is_proved_at_q64(tmp_path):
    fam = make_family("hard", 64, 7)
    out = prove(exact_sum_weights(tmp_path / "w.npz", fam), fam, 4, "cut")
    assert out.verdict == "proved" and out.seconds < 60


def test_the_committed_f64_model_is_refuted_with_an_input_the_engine_answers_wrong():
    path = f"{REBASE}/hard-q64-s7-linear-elu1sum-L1-H1-r1-d64-lr0.001-seed0.npz"
    w = load_weights(path)
    fam = weights_family(w)
    out = prove(w, fam, 4, "cut")
    assert out.verdict == "refuted"
    T = np.array([out.counterexample])
    ans = engine_answers(w, fam, 4, "cut", T)
    assert (ans != T).any() and ans.tolist() == [out.engine_answers]
