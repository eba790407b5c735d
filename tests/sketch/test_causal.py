"""Causal weights files in the engine: the jitted runner against the NumPy reference
(``tests/naive.py``, ``causal_outputs``), the transcript at the cut, and the file checks."""

import naive
import numpy as np
import pytest
from weights_files import random_causal_weights

from sketchsim.errors import PluginError
from sketchsim.minip.bits import unpack_bits
from sketchsim.sketch.causal import KINDS, causal_entries, causal_order
from sketchsim.sketch.channels import declared_bits
from sketchsim.sketch.family_plugins import make_family
from sketchsim.sketch.trained import load_weights, save_weights_file, trained_engine, trained_plan

SIZES = {"window": 3}


def _engine(w, fam, bits, rounding="every"):
    return trained_engine(fam.context(), w, bits, rounding=rounding)


def _check(w, fam, T, bits, rounding="every"):
    engine = _engine(w, fam, bits, rounding)
    res = engine.run(fam.variable_tokens(T), store=True, fixed=fam.fixed_tokens())
    X = unpack_bits(fam.tokens(T), fam.m)
    _, codes, answers = naive.causal_outputs(w, X, bits, rounding=rounding)
    np.testing.assert_array_equal(res.answers, answers)
    np.testing.assert_array_equal(res.transcripts, codes)
    return res


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("bits", [1, 4, 32])
def test_runner_matches_reference(tmp_path, kind, bits):
    fam = make_family("hard", 3, 2)
    w = random_causal_weights(tmp_path / "w.npz", fam, kind, 2, 2, 3, 4, window=3, seed=bits)
    T = fam.sample_answers(20)
    res = _check(w, fam, T, bits)
    assert res.transcripts.shape[1] == 2 * 2 * causal_entries(w.arch)
    assert res.transcripts.max() <= 2**bits - 1 and res.transcripts.min() >= 0
    if bits > 1:  # not every answer the same: the comparison has something to compare
        assert len(np.unique(res.answers)) > 1


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("bits", [1, 4, 32])
def test_cut_rounding_matches_reference(tmp_path, kind, bits):
    """rounding=cut: the state exact on both sides of the cut, every register rounded
    there; two layers, two heads, the same transcript size as rounding=every."""
    fam = make_family("hard", 3, 2)
    w = random_causal_weights(tmp_path / "w.npz", fam, kind, 2, 2, 3, 4, window=3, seed=bits)
    T = fam.sample_answers(20)
    res = _check(w, fam, T, bits, "cut")
    every = _check(w, fam, T, bits)
    assert res.transcripts.shape == every.transcripts.shape
    assert res.transcripts.max() <= 2**bits - 1 and res.transcripts.min() >= 0


@pytest.mark.parametrize("fmap", ["elu1sum", "signed", "relu", "softplus"])
@pytest.mark.parametrize("bits", [1, 4, 32])
@pytest.mark.parametrize("rounding", ["every", "cut"])
def test_linear_feature_maps_match_reference(tmp_path, fmap, bits, rounding):
    """Every map of causal linear attention, r = 3 (elu1sum divides by the sum of three
    features), rounded every token and at the cut; the unnormalized maps keep r d entries."""
    fam = make_family("hard", 3, 2)
    w = random_causal_weights(tmp_path / "w.npz", fam, "linear", 2, 2, 3, 4, fmap, seed=bits)
    res = _check(w, fam, fam.sample_answers(20), bits, rounding)
    E = 3 * 4 if fmap in ("elu1sum", "signed") else 3 * 5
    assert causal_entries(w.arch) == E and res.transcripts.shape[1] == 2 * 2 * E
    if bits > 1:
        assert len(np.unique(res.answers)) > 1


@pytest.mark.parametrize("kind", ["linear", "deltanet", "window"])
def test_cut_rounding_on_mqar_rounds_once(tmp_path, kind):
    """MQAR has several data tokens: rounding=cut rounds the state once, after the last
    of them; at 32 bits the answers are the exact model's."""
    fam = make_family("mqar", 3, 3, options={"pairs": 6})
    w = random_causal_weights(tmp_path / "w.npz", fam, kind, 1, 1, 3, 3, window=4)
    T = fam.sample_answers(30)
    _check(w, fam, T, 6, "cut")
    res = _check(w, fam, T, 32, "cut")
    _, _, exact = naive.causal_outputs(w, unpack_bits(fam.tokens(T), fam.m))
    np.testing.assert_array_equal(res.answers, exact)


def test_cut_rounding_is_refused_for_kernel_models_and_unknown_names(tmp_path):
    from weights_files import random_weights

    fam = make_family("hard", 3, 2)
    kernel = random_weights(tmp_path / "k.npz", fam, 1, 1, 2, 2, "elu1")
    with pytest.raises(PluginError, match="rounding=cut applies to causal models"):
        trained_plan(fam.context(), kernel, 4, "cut")
    causal = random_causal_weights(tmp_path / "c.npz", fam, "gla", 1, 1, 2, 2)
    with pytest.raises(PluginError, match="rounding must be every or cut"):
        trained_plan(fam.context(), causal, 4, "late")


@pytest.mark.parametrize("q,s", [(62, 1), (31, 2), (63, 1), (4, 1)])
def test_token_widths_across_words(tmp_path, q, s):
    """m = 64, 65, 65 (two words) and 6 bits; the linear map on every bit."""
    fam = make_family("hard", q, s)
    w = random_causal_weights(tmp_path / "w.npz", fam, "linear", 1, 1, 2, 3, seed=q)
    zeros = np.zeros((1, q), dtype=fam.answer_dtype)
    ones = np.full((1, q), s, dtype=fam.answer_dtype)
    _check(w, fam, np.concatenate([zeros, ones, fam.sample_answers(2)]), 8)


@pytest.mark.parametrize("kind", ["linear", "deltanet", "window"])
def test_mqar_with_distractors(tmp_path, kind):
    fam = make_family("mqar", 3, 3, options={"pairs": 6})
    w = random_causal_weights(tmp_path / "w.npz", fam, kind, 1, 1, 3, 3, window=4)
    _check(w, fam, fam.sample_answers(30), 6)


def test_causal_order_reads_data_before_queries():
    np.testing.assert_array_equal(causal_order(3, 6), [3, 4, 5, 0, 1, 2])


def test_declared_bits_are_entries_times_bits(tmp_path):
    fam = make_family("hard", 4, 1)
    w = random_causal_weights(tmp_path / "w.npz", fam, "gla", 2, 3, 2, 5)
    plan = trained_plan(fam.context(), w, 7)
    assert plan.layers[0].channel == "state"
    assert declared_bits(plan.layers, fam.context().n_tokens) == 2 * 3 * (2 * 5) * 7
    assert plan.layers[0].speaker_positions(fam.context().n_tokens) == (4,)


def test_the_cut_state_alone_decides_the_answers(tmp_path):
    """Theorem 5.1 in the runner: inputs with the same cut registers get the same answers."""
    fam = make_family("hard", 3, 3)
    w = random_causal_weights(tmp_path / "w.npz", fam, "linear", 1, 1, 1, 2)
    T = fam.all_answers()
    res = _engine(w, fam, 2).run(fam.variable_tokens(T), store=True, fixed=fam.fixed_tokens())
    seen = {}
    for row, ans in zip(map(bytes, res.transcripts.astype(np.int64)), res.answers, strict=True):
        assert np.array_equal(seen.setdefault(row, ans), ans)
    assert len(seen) < len(T)  # 2-bit registers merge inputs: the check is not vacuous


def test_window_slots_must_share_their_range(tmp_path):
    fam = make_family("hard", 3, 1)
    w = random_causal_weights(tmp_path / "w.npz", fam, "window", 1, 1, 2, 2, window=2)
    arrays = dict(w.arrays)
    lo = arrays["L0.H0.lo"].copy()
    lo[0] += 1.0
    arrays["L0.H0.lo"] = lo
    header = {k: v for k, v in w.header.items() if k not in ("format", "format_version")}
    save_weights_file(tmp_path / "bad.npz", header, arrays)
    with pytest.raises(PluginError, match="differs between window slots"):
        load_weights(tmp_path / "bad.npz")


@pytest.mark.parametrize(
    "change, message",
    [
        ({"kind": "rwkv"}, "kind must be one of"),
        ({"feature_map": "elu1", "kind": "gla"}, "feature_map is identity"),
        ({"window": 0, "kind": "window", "feature_map": "softmax"}, "window must be in"),
        ({"window": 2, "kind": "gla", "feature_map": "identity"}, "only a window model"),
        ({"rank": 65, "kind": "based", "feature_map": "taylor"}, "rank is at most 64"),
    ],
)
def test_header_fields_are_checked(tmp_path, change, message):
    fam = make_family("hard", 3, 1)
    w = random_causal_weights(tmp_path / "w.npz", fam, "linear", 1, 1, 2, 2)
    header = {k: v for k, v in w.header.items() if k not in ("format", "format_version")}
    header["architecture"] = {**header["architecture"], **change}
    with pytest.raises(PluginError, match=message):
        save_weights_file(tmp_path / "bad.npz", header, w.arrays)


def test_label_must_name_the_architecture(tmp_path):
    fam = make_family("hard", 3, 1)
    w = random_causal_weights(tmp_path / "w.npz", fam, "mamba", 1, 1, 2, 2)
    header = {k: v for k, v in w.header.items() if k not in ("format", "format_version")}
    save_weights_file(tmp_path / "ok.npz", {**header, "label": "mamba L1 H1 r2 d2"}, w.arrays)
    with pytest.raises(PluginError, match="does not describe"):
        save_weights_file(tmp_path / "bad.npz", {**header, "label": "gla L1 H1 r2 d2"}, w.arrays)


def test_plugins_may_not_use_the_state_channel():
    from sketchsim.sketch.protocol import Layer, Plan, Protocol

    def setup(ctx, params):
        return Plan([Layer("state", 1, 2)], 1, print, print, print)

    with pytest.raises(PluginError, match="sketchsim's own causal models"):
        Protocol("mine", "", setup).plan(make_family("hard", 2, 1).context(), {})


@pytest.mark.parametrize("kind", ["linear", "based", "mamba", "window"])
def test_inputs_whose_queries_differ(tmp_path, kind):
    """The runner computes the queries' layer-0 projections once when every input shares
    its query tokens; inputs that do not (any tokens) take the per-input path: both equal
    the reference."""
    from sketchsim.minip.bits import pack_bits
    from sketchsim.sketch import causal_kernel
    from sketchsim.sketch.causal import _dims, _pack

    fam = make_family("hard", 3, 2)
    w = random_causal_weights(tmp_path / "w.npz", fam, kind, 2, 1, 2, 3, window=2)
    X = np.random.default_rng(3).integers(0, 2, size=(12, fam.context().n_tokens, fam.m))
    aux, offs = _pack(w, 5)
    dims = _dims(w, fam.context(), 5)
    order = causal_order(fam.q, fam.context().n_tokens)
    tokens = pack_bits(X.reshape(-1, fam.m).astype(np.uint8)).reshape(12, X.shape[1], -1)
    fp, ans, tr = causal_kernel.run_batch(tokens, order, dims, offs, aux, 1e-6, True)
    _, codes, answers = naive.causal_outputs(w, X, 5)
    np.testing.assert_array_equal(ans, answers)
    np.testing.assert_array_equal(tr, codes)
