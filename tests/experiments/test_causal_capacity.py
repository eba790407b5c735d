"""Causal architectures through the capacity suite: trained in torch, exported, checked at
save (the file's model and the engine at K = 32 against the trained model), measured."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from sketchsim.experiments.capacity import make_family, measure_weights  # noqa: E402
from sketchsim.experiments.capacity_suite import (  # noqa: E402
    CapacitySpec,
    _tensor,
    engine_disagreement,
    train_capacity,
)
from sketchsim.experiments.causal_models import (  # noqa: E402
    CausalModel,
    causal_arch,
    causal_from_weights,
    causal_qat_quantizer,
    export_causal,
    fixed_point_state,
    state_range,
)
from sketchsim.experiments.plan import parse_arch  # noqa: E402
from sketchsim.sketch.causal import KINDS, causal_entries  # noqa: E402
from sketchsim.sketch.engine import Engine  # noqa: E402
from sketchsim.sketch.trained import Weights, load_weights, trained_plan  # noqa: E402


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)


def _spec(kind, **kw):
    base = dict(family="hard", q=2, s=1, model="causal", layers=1, heads=1, rank=2,
                value_width=2, feature_map="elu1", seed=0, steps=60, arch=kind,
                window=3 if kind == "window" else 0)  # fmt: skip
    base.update(kw)
    return CapacitySpec(**base)


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_trains_exports_and_measures(tmp_path, kind):
    row = train_capacity(_spec(kind), save_to=tmp_path)
    assert row["weights_refused"] is None
    assert row["architecture"].startswith("linear-elu1" if kind == "linear" else kind)
    w = load_weights(tmp_path / row["weights"])
    assert w.causal and w.arch["kind"] == kind
    measured = measure_weights(tmp_path / row["weights"])
    E = causal_entries(w.arch)
    assert measured["kind"] == kind and measured["state_elements"] == E
    assert measured["float_state_bits"] == 32 * E
    if measured["bits_per_coordinate"] is not None:
        assert measured["cut_bits"] == E * measured["bits_per_coordinate"]
    assert measured["engine_accuracy_k32"] == pytest.approx(row["accuracy"], abs=0.01)


def test_the_file_runs_the_trained_model(tmp_path):
    """Every architecture at two layers and two heads: the file's torch model equals the
    trained one, and the engine at K = 32 gives its rounded outputs (the save check)."""
    fam = make_family("mqar", 2, 3, options={"pairs": 4})
    T = fam.sample_answers(64)
    X = _tensor(fam, T, torch.float64)
    for kind in KINDS:
        torch.manual_seed(1)
        model = CausalModel(causal_arch(kind, fam.m, 2, 2, 2, 3, window=4), fam.q).double()
        cal = state_range(model, X)
        arrays = export_causal(model, cal)
        header = {"format": "sketchsim-trained", "format_version": 1,
                  "architecture": model.arch,
                  "family": {"name": fam.name, "q": fam.q, "s": fam.s, "seed": fam.seed,
                             "options": fam.options()}}  # fmt: skip
        w = Weights(header, arrays)
        with torch.no_grad():
            y = model(X)[:, : fam.q].numpy()
            y_file = causal_from_weights(w)(X)[:, : fam.q].numpy()
        np.testing.assert_allclose(y_file, y, rtol=0, atol=1e-12)
        assert engine_disagreement(w, fam, T, y) is None, kind
        # a file whose arrays say something else is caught
        bad = dict(arrays)
        bad["L1.H0.wv"] = arrays["L1.H0.wv"] + 0.5
        assert engine_disagreement(Weights(header, bad), fam, T, y) is not None, kind


def test_fixed_point_forward_is_the_engines(tmp_path):
    """The torch model with K-bit registers gives the engine's answers at K."""
    fam = make_family("hard", 3, 1)
    T = fam.all_answers()
    X = _tensor(fam, T, torch.float64)
    for kind in ("gla", "gated-deltanet", "window"):
        torch.manual_seed(2)
        model = CausalModel(causal_arch(kind, fam.m, 1, 1, 2, 2, window=2), fam.q).double()
        cal = state_range(model, X)
        header = {"format": "sketchsim-trained", "format_version": 1,
                  "architecture": model.arch,
                  "family": {"name": fam.name, "q": fam.q, "s": fam.s, "seed": fam.seed,
                             "options": fam.options()}}  # fmt: skip
        w = Weights(header, export_causal(model, cal))
        for bits in (2, 5):
            with torch.no_grad():
                y = model(X, quantize=fixed_point_state(bits, cal))[:, : fam.q].numpy()
            engine = Engine(trained_plan(fam.context(), w, bits), fam.context(), "trained")
            got = engine.run(fam.variable_tokens(T), fixed=fam.fixed_tokens()).answers
            np.testing.assert_array_equal(got, np.clip(np.floor(y + 0.5), -1, fam.s + 1))


def test_quantization_aware_training_of_a_causal_model(tmp_path):
    row = train_capacity(_spec("gla", train_bits=4, steps=40), save_to=tmp_path)
    assert row["trained_at_bits"] == 4 and row["weights_refused"] is None
    w = load_weights(tmp_path / row["weights"])
    assert w.header["trained_at_bits"] == 4
    model = CausalModel(w.arch, 2)
    quantize = causal_qat_quantizer(model, 4)
    x = _tensor(make_family("hard", 2, 1), np.array([[0, 1], [1, 1]]))
    y = model(x, quantize=quantize)
    y.sum().backward()  # straight-through: the gradient reaches the weights
    assert model.layers[0].wk.weight.grad.abs().sum() > 0


@pytest.mark.parametrize(
    "text, want", [("gla", ("gla", 0)), ("window:8", ("window", 8)), ("softmax", ("softmax", 0))]
)
def test_parse_arch(text, want):
    assert parse_arch(text) == want


@pytest.mark.parametrize("text", ["rwkv", "gla:4", "window:0", "window:x"])
def test_parse_arch_refuses(text):
    from sketchsim.errors import SketchsimError

    with pytest.raises(SketchsimError):
        parse_arch(text)
