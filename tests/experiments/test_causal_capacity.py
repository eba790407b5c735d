"""Causal architectures through the capacity suite: trained in torch, exported, checked at
save (the file's model and the engine at K = 32 against the trained model), measured."""

import json
import re
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from sketchsim.experiments.capacity_suite import (  # noqa: E402
    CapacitySpec,
    engine_disagreement,
    input_tensor,
    train_capacity,
)
from sketchsim.experiments.causal_models import (  # noqa: E402
    AFFINE_KINDS,
    HEADROOM,
    CausalModel,
    causal_arch,
    causal_from_weights,
    causal_qat_quantizer,
    export_causal,
    fixed_point_state,
    state_range,
)
from sketchsim.experiments.plan import parse_arch  # noqa: E402
from sketchsim.runs.capacity import measure_weights  # noqa: E402
from sketchsim.sketch.causal import KINDS, causal_entries  # noqa: E402
from sketchsim.sketch.family_plugins import make_family  # noqa: E402
from sketchsim.sketch.trained import Weights, load_weights, trained_engine  # noqa: E402


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)


def _spec(kind, **kw):
    base = dict(family="hard", q=2, s=1, model="causal", layers=1, heads=1, rank=2,
                value_width=2, feature_map="elu1", seed=0, steps=30, arch=kind,
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
    X = input_tensor(fam, T, torch.float64)
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


SUM_MODELS = [("linear", "elu1", 1, 1), ("linear", "signed", 1, 2), ("linear", "relu", 2, 1),
              ("linear", "elu1sum", 1, 2), ("linear", "elu1sum", 2, 1),
              ("based", "elu1", 1, 2), ("based", "elu1", 2, 2)]  # fmt: skip


def _sum_families():
    """F(q, s) (one data token) and MQAR (several)."""
    return make_family("hard", 5, 3), make_family("mqar", 3, 3, options={"pairs": 5})


def _sum_model(fam, kind, fmap, layers, heads):
    torch.manual_seed(4)
    return CausalModel(causal_arch(kind, fam.m, layers, heads, 2, 3, fmap), fam.q).double()


def _outputs_and_gradients(model, X, q, quantize, loop):
    """The outputs ``[B, N]`` and the gradient of ``sum(y[:, :q]^2)`` (one vector), from
    the token loop (``loop``) or from the one-pass paths."""
    model.zero_grad()
    if loop:  # the token loop, as every other kind runs
        model.kind_is_sum = lambda: False
    try:
        y = model(X, quantize=quantize)
    finally:
        model.__dict__.pop("kind_is_sum", None)
    (y[:, :q] ** 2).sum().backward()
    grads = [torch.zeros_like(p) if p.grad is None else p.grad for p in model.parameters()]
    return y.detach(), torch.cat([g.flatten() for g in grads])


@pytest.mark.parametrize("kind, fmap, layers, heads", SUM_MODELS)
def test_the_shared_query_readout_equals_the_token_loop(kind, fmap, layers, heads):
    """The one-pass forward of sum-state models (its shared-query readout on the last
    layer, its cumsum elsewhere) gives the token loop's outputs and gradients."""
    for fam in _sum_families():
        X = input_tensor(fam, fam.sample_answers(40), torch.float64)
        model = _sum_model(fam, kind, fmap, layers, heads)
        fast = _outputs_and_gradients(model, X, fam.q, None, loop=False)
        slow = _outputs_and_gradients(model, X, fam.q, lambda layer, S: S, loop=True)
        np.testing.assert_allclose(fast[0], slow[0], rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(fast[1], slow[1], rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("kind", AFFINE_KINDS)
@pytest.mark.parametrize("heads", [1, 2])
def test_the_affine_readout_equals_the_token_loop(kind, heads):
    """One layer of a kind linear in its state: the queries' outputs through the affine
    map of the cut state (the queries run on the zero and unit states only) equal the
    token loop's, outputs and gradients, on F(q, s) and MQAR (several data tokens)."""
    for fam in _sum_families():
        X = input_tensor(fam, fam.sample_answers(40), torch.float64)
        torch.manual_seed(4)
        model = CausalModel(causal_arch(kind, fam.m, 1, heads, 2, 3), fam.q).double()
        assert model._affine_in_state(40, True, None, None, fam.n_tokens - fam.q)
        fast = _outputs_and_gradients(model, X, fam.q, None, loop=False)
        slow = _outputs_and_gradients(model, X, fam.q, lambda layer, S: S, loop=False)
        np.testing.assert_allclose(fast[0], slow[0], rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(fast[1], slow[1], rtol=1e-8, atol=1e-8)
        assert fast[1].abs().max() > 0


@pytest.mark.parametrize("kind, fmap, layers, heads", SUM_MODELS)
def test_the_rounded_forward_equals_the_token_loop(kind, fmap, layers, heads):
    """With registers (the engine's fixed point, and quantization-aware training's
    straight-through rounding calibrated on the batch) the sum-state forward that rounds
    each token's state in turn gives the token loop's outputs and gradients."""
    for fam in _sum_families():
        X = input_tensor(fam, fam.sample_answers(40), torch.float64)
        model = _sum_model(fam, kind, fmap, layers, heads)
        for quantize in (fixed_point_state(3, state_range(model, X)),
                         causal_qat_quantizer(model, 3)):  # fmt: skip
            fast = _outputs_and_gradients(model, X, fam.q, quantize, loop=False)
            slow = _outputs_and_gradients(model, X, fam.q, quantize, loop=True)
            exact = model(X)  # rounded: not the exact outputs
            assert not torch.allclose(fast[0], exact.detach())
            np.testing.assert_allclose(fast[0], slow[0], rtol=1e-12, atol=1e-12)
            np.testing.assert_allclose(fast[1], slow[1], rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("kind, fmap, layers, heads", SUM_MODELS)
def test_the_state_range_equals_the_states_extremes(kind, fmap, layers, heads):
    """:func:`state_range` (the last layer's extremes over shared queries taken from the
    data states and the queries' prefix sums, without the per-input query states) equals
    the entrywise extremes of every state the token loop visits, with the headroom."""
    for fam in _sum_families():
        X = input_tensor(fam, fam.sample_answers(40), torch.float64)
        model = _sum_model(fam, kind, fmap, layers, heads)
        seen = []
        model.kind_is_sum = lambda: False
        with torch.no_grad():
            model(X, states=seen)
        del model.kind_is_sum
        for lay, (lo, span) in enumerate(state_range(model, X)):
            st = torch.stack([s for i, _, s in seen if i == lay])  # [N, B, H, E]
            low, high = st.amin((0, 1)).numpy(), st.amax((0, 1)).numpy()
            pad = HEADROOM * (high - low)
            np.testing.assert_allclose(lo, low - pad, rtol=1e-12, atol=1e-12)
            np.testing.assert_allclose(span, high - low + 2 * pad, rtol=1e-12, atol=1e-12)


def test_fixed_point_forward_is_the_engines(tmp_path):
    """The torch model with K-bit registers gives the engine's answers at K."""
    fam = make_family("hard", 3, 1)
    T = fam.all_answers()
    X = input_tensor(fam, T, torch.float64)
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
            engine = trained_engine(fam.context(), w, bits)
            got = engine.run(fam.variable_tokens(T), fixed=fam.fixed_tokens()).answers
            np.testing.assert_array_equal(got, np.clip(np.floor(y + 0.5), -1, fam.s + 1))


def test_quantization_aware_training_of_a_causal_model(tmp_path):
    row = train_capacity(_spec("gla", train_bits=4, steps=40), save_to=tmp_path)
    assert row["trained_at_bits"] == 4 and row["weights_refused"] is None
    w = load_weights(tmp_path / row["weights"])
    assert w.header["trained_at_bits"] == 4
    model = CausalModel(w.arch, 2)
    quantize = causal_qat_quantizer(model, 4)
    x = input_tensor(make_family("hard", 2, 1), np.array([[0, 1], [1, 1]]))
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


# --------------------------------------------------- user layers: the plug-in contract (#44)

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "capacity" / "decay_layer.py"

_PLUGINS = """
import torch
from sketchsim.experiments.capacity_models import KernelLayer
from sketchsim.experiments.causal_models import CausalLayer
from sketchsim.experiments.model_plugins import ModelType


class Softplus(KernelLayer):
    feature_map = "softplus"


class Halving(CausalLayer):
    '''Says gla, but halves its state each token without exporting how.'''
    kind = "gla"

    def gates(self, u):
        g = torch.full((u.shape[0], self.heads, self.r), -0.6931471805599453)
        return {"gk": g}


SOFT = ModelType("soft", "softplus features, declared", Softplus)
HALF = ModelType("half", "an undeclared decay", Halving)
"""


def _plugin_spec(path, name, **kw):
    from sketchsim.experiments.model_plugins import declared_map, resolve_model

    layer = resolve_model(f"{path}:{name}")
    kind = getattr(layer, "kind", "")
    base = dict(family="hard", q=3, s=1, model="causal" if kind else "kernel", layers=1,
                heads=1, rank=2, value_width=4, feature_map=declared_map(layer), seed=0,
                steps=150, model_plugin=f"{path}:{name}", arch=kind)  # fmt: skip
    base.update(kw)
    return CapacitySpec(**base)


def test_a_declared_softplus_layer_is_exported_and_runs(tmp_path):
    """Was: softplus features had no weights file (or one measured as elu1)."""
    path = tmp_path / "layers.py"
    path.write_text(_PLUGINS)
    row = train_capacity(_plugin_spec(path, "SOFT"), save_to=tmp_path / "w")
    assert row["weights_refused"] is None and row["architecture"] == "SOFT L1 H1 r2 d4"
    w = load_weights(tmp_path / "w" / row["weights"])
    assert w.arch["feature_map"] == "softplus"
    measured = measure_weights(tmp_path / "w" / row["weights"])
    assert measured["accuracy_mismatch"] is False


def test_the_documented_decaying_layer_is_exported_and_runs(tmp_path):
    """Was: a layer with a decay could not be exported at all."""
    row = train_capacity(_plugin_spec(EXAMPLE, "decay"), save_to=tmp_path / "w")
    assert row["weights_refused"] is None
    w = load_weights(tmp_path / "w" / row["weights"])
    assert w.arch["kind"] == "gla" and not w.arrays["L0.H0.wg"].any()
    measured = measure_weights(tmp_path / "w" / row["weights"])
    assert measured["kind"] == "gla" and measured["accuracy_mismatch"] is False


def test_an_undeclared_decay_is_refused_at_save(tmp_path):
    path = tmp_path / "layers.py"
    path.write_text(_PLUGINS)
    row = train_capacity(_plugin_spec(path, "HALF", steps=20), save_to=tmp_path / "w")
    assert row["weights"] is None and "away from the trained model's" in row["weights_refused"]


@pytest.mark.parametrize(
    "body, message",
    [
        ("class L(KernelLayer):\n    feature_map = 'gelu'",
         "feature map 'gelu' is not one the engine computes"),
        ("class L(CausalLayer):\n    kind = 'rwkv'", "kind 'rwkv' is not a causal architecture"),
        ("class L(CausalLayer):\n    kind = 'gla'\n    feature_map = 'elu1'",
         "a gla layer's feature map is identity"),
        ("class L(KernelLayer):\n    head_arrays = None", "its layer has no head_arrays"),
    ],
)  # fmt: skip
def test_a_layer_the_engine_cannot_run_is_refused_before_training(tmp_path, body, message):
    from click.testing import CliRunner

    from sketchsim.cli import main

    path = tmp_path / "bad.py"
    path.write_text(
        "from sketchsim.experiments.capacity_models import KernelLayer\n"
        "from sketchsim.experiments.causal_models import CausalLayer\n"
        "from sketchsim.experiments.model_plugins import ModelType\n"
        f"{body}\nMODEL = ModelType('bad', 'cannot run', L)\n"
    )
    res = CliRunner().invoke(main, ["sweep", "--suite", "capacity", "--q", "2", "--s", "1",
                                    "--model-plugin", f"{path}:bad", "--json",
                                    str(tmp_path / "s.json")])  # fmt: skip
    assert res.exit_code == 2
    assert f"model bad: the engine could not run it: {message}" in res.output
    assert not (tmp_path / "s.json").exists()  # nothing trained


def test_sweep_takes_architectures_and_family_specs(tmp_path):
    import json

    from click.testing import CliRunner

    from sketchsim.cli import main

    out = tmp_path / "s.json"
    argv = ["sweep", "--suite", "capacity", "--family", "hard,mqar:pairs=4,keys=8", "--arch",
            "gla,window:2,softmax", "--q", "2", "--s", "1", "--seeds", "1", "--steps", "3",
            "--layers", "1", "--ranks", "1", "--value-widths", "2", "--json", str(out),
            "--save-weights", str(tmp_path / "w")]  # fmt: skip
    res = CliRunner().invoke(main, argv)
    assert res.exit_code == 0, res.output
    # a family spec's ':', '=' and ',' stay out of file names (trained:weights=FILE,bits=K)
    names = sorted(p.name for p in (tmp_path / "w").glob("*.npz"))
    # the readable fields, then the run id covering every other setting (#60)
    assert any(re.fullmatch(r"mqar_pairs_4_keys_8-q2-s1-gla-L1-H1-r1-d2-lr0\.03-seed0-[0-9a-f]{10}"
                            r"\.npz", n) for n in names), names  # fmt: skip
    assert not any(set(n) & set(":=,") for n in names)
    runs = json.loads(out.read_text())["runs"]
    got = {(r["family"], r["architecture"]) for r in runs}
    assert got == {
        (fam, arch)
        for fam in ("hard", "mqar:pairs=4,keys=8")
        for arch in ("gla L1 H1 r1 d2", "window L1 H1 r1 d2 w2", "softmax L1 H1 d2")
    }
    assert json.loads(out.read_text())["header"]["archs"] == ["gla", "window:2", "softmax"]


def test_schedule_and_training_inputs_are_the_runs_and_recorded(tmp_path):
    """--schedule constant keeps --lr at every step, --train-inputs sets the training set;
    both are in the header and every row; the default one-cycle key is the older one."""
    import json

    from click.testing import CliRunner

    from sketchsim.cli import main
    from sketchsim.experiments.capacity_suite import scheduler

    out = tmp_path / "s.json"
    argv = ["sweep", "--suite", "capacity", "--arch", "linear", "--q", "3", "--s", "1",
            "--seeds", "1", "--steps", "3", "--layers", "1", "--ranks", "1",
            "--value-widths", "2", "--schedule", "constant", "--train-inputs", "5",
            "--json", str(out)]  # fmt: skip
    res = CliRunner().invoke(main, argv)
    assert res.exit_code == 0, res.output
    data = json.loads(out.read_text())
    assert data["header"]["schedule"] == "constant" and data["header"]["train_inputs"] == 5
    (run,) = data["runs"]
    assert run["schedule"] == "constant" and run["train_inputs"] == 5
    assert run["spec"]["train_inputs"] == 5 and run["spec"]["schedule"] == "constant"
    spec = _spec("linear", steps=10, lr=0.02)
    for name, want in (("onecycle", None), ("constant", 0.02)):
        sp = CapacitySpec(**{**spec.__dict__, "schedule": name})
        opt = torch.optim.Adam([torch.nn.Parameter(torch.zeros(1))], sp.lr)
        sched = scheduler(opt, sp)
        lrs = []
        for _ in range(10):
            lrs.append(opt.param_groups[0]["lr"])
            opt.step()
            sched.step()
        assert (lrs == [want] * 10) if want else (max(lrs) > 0.019 and lrs[0] < 0.002)
    assert "schedule" not in json.loads(spec.key())  # older runs keep their resume key
    refused = CliRunner().invoke(main, ["sweep", "--suite", "ood", "--schedule", "constant"])
    assert refused.exit_code == 2
    assert "--schedule applies only with --suite capacity" in refused.output


def test_split_specs():
    from sketchsim.cli.options import split_specs
    from sketchsim.errors import SketchsimError

    assert split_specs("hard,mqar:pairs=8,keys=16,x.py:F", "--family") == [
        "hard",
        "mqar:pairs=8,keys=16",
        "x.py:F",
    ]
    with pytest.raises(SketchsimError, match="no NAME"):
        split_specs("keys=16,hard", "--family")


def test_the_committed_f64_head_needs_its_normalizer_resolved():
    """docs/capacity.md (F(64,7) at K = 4): the fitted elu1 head's normalizer ``z`` at the
    cut varies by more than a factor of 30 across inputs (1,024 sampled), while the 64 queries
    add under 1% of that range: a register of few uniform steps cannot hold the small
    ``z`` that ``o = S / z`` divides by."""
    from sketchsim.sketch.family import HardFamily

    path = Path(__file__).resolve().parents[2] / "docs/capacity/frontier/f64"
    w = load_weights(path / "hard-q64-s7-linear-elu1-L1-H1-r1-d64-lr0.001-seed0.npz")
    model = causal_from_weights(w)
    fam = HardFamily(64, 7)
    X = input_tensor(fam, fam.sample_answers(1024), torch.float64)
    seen = []
    with torch.no_grad():
        model(X, states=seen)
    z_cut, z_end = seen[0][2][:, 0, -1], seen[-1][2][:, 0, -1]  # entry E - 1: z (r = 1)
    assert float(z_cut.min()) > 0 and float(z_cut.max() / z_cut.min()) > 30
    assert float((z_end - z_cut).abs().max()) < 0.01 * float(z_cut.max() - z_cut.min())


def test_the_committed_f16_7_deltanet_misses_where_its_data_gates_do_not_saturate():
    """docs/capacity.md (DeltaNet at s = 7): the F(16,7) model fits all but a tail of
    inputs, and the tail is where its one-feature key ``k' = k / |k|`` flips sign or its
    write gate ``beta`` on the data token stays below 0.9; the queries' gates are near 0
    (they keep the data's write)."""
    from sketchsim.sketch.family import HardFamily

    path = Path(__file__).resolve().parents[2] / "docs/capacity/frontier/s7"
    w = load_weights(path / "hard-q16-s7-deltanet-L1-H1-r1-d16-lr0.003-seed0.npz")
    model = causal_from_weights(w)
    fam = HardFamily(16, 7)
    T = fam.sample_answers(4096)
    X = input_tensor(fam, T, torch.float64)
    with torch.no_grad():
        wrong = ((model(X)[:, :16] - torch.as_tensor(T, dtype=torch.float64)).abs() >= 0.5).any(1)
        layer = model.layers[0]
        data = 2 * X[:, 16] - 1  # the one data token (the family stores the queries first)
        beta = torch.sigmoid(layer.wbeta(data)).view(-1)
        sign = torch.sign(layer.wk(data).view(-1))
        query_beta = torch.sigmoid(layer.wbeta(2 * X[0, :16] - 1)).view(-1)
    majority = torch.sign(sign.sum())
    assert 0 < int(wrong.sum()) <= 0.01 * len(T)
    assert bool((sign[~wrong] == majority).all())  # every right input keeps the key's sign
    tail = (sign != majority) | (beta < 0.9)
    assert int((wrong & tail).sum()) >= 0.9 * int(wrong.sum())
    assert float(beta[~wrong].median()) > 0.999 and float(beta[wrong].median()) < 0.9
    assert float(query_beta.max()) < 0.05


def test_keep_best_keeps_the_steps_model_with_the_most_training_inputs_right(tmp_path):
    """--keep best: the kept model is the one the same seeded run has after ``kept_step``
    steps (same training error, same accuracy), and no other step's model gets more
    training inputs right; --keep last is the older key, and the default."""
    import json

    from click.testing import CliRunner

    from sketchsim.cli import main

    common = dict(q=3, rank=2, value_width=3, lr=0.3, schedule="constant", stop_below=1e-9)
    best = train_capacity(_spec("linear", steps=40, keep="best", **common))
    assert 0 < best["kept_step"] < best["steps"] == 40 and best["keep"] == "best"
    same = train_capacity(_spec("linear", steps=best["kept_step"], **common))
    assert same["kept_step"] == same["steps"] == best["kept_step"]
    for name in ("max_abs_error", "train_accuracy", "accuracy"):
        assert same[name] == best[name], name
    for steps in (0, 10, 20, 30, 40):
        other = train_capacity(_spec("linear", steps=steps, **common))
        assert other["train_accuracy"] <= best["train_accuracy"], steps
    last = train_capacity(_spec("linear", steps=40, **common))
    assert last["train_accuracy"] < best["train_accuracy"]
    assert "keep" not in json.loads(_spec("linear").key())
    assert json.loads(_spec("linear", keep="best").key())["keep"] == "best"
    out = tmp_path / "k.json"
    argv = ["sweep", "--suite", "capacity", "--arch", "linear", "--q", "3", "--s", "1",
            "--seeds", "1", "--steps", "3", "--layers", "1", "--ranks", "1",
            "--value-widths", "2", "--keep", "best", "--json", str(out)]  # fmt: skip
    res = CliRunner().invoke(main, argv)
    assert res.exit_code == 0, res.output
    data = json.loads(out.read_text())
    assert data["header"]["keep"] == "best" and data["runs"][0]["keep"] == "best"
    refused = CliRunner().invoke(main, ["sweep", "--suite", "ood", "--keep", "best"])
    assert refused.exit_code == 2 and "--keep applies only with --suite capacity" in refused.output


def test_capacity_rounding_cut_is_the_protocols_and_recorded(tmp_path):
    """``sketchsim capacity --rounding cut`` measures a causal file with the state rounded
    only at the cut: its curve is the engine's at rounding=cut, the row and the file's
    parameters record it; an unknown value is refused in one line."""
    import json

    from click.testing import CliRunner

    from sketchsim.cli import main
    from sketchsim.runs.capacity import _engine_answers
    from sketchsim.sketch.plugins import resolve

    folder = tmp_path / "w"
    row = train_capacity(_spec("deltanet", q=3, steps=20), save_to=folder)
    out = tmp_path / "c.json"
    res = CliRunner().invoke(main, ["capacity", str(folder), "--rounding", "cut",
                                    "--json", str(out)])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "only the transcript rounded, at the cut" in res.output  # the table says so
    data = json.loads(out.read_text())
    (got,) = data["rows"]
    assert got["rounding"] == "cut" and data["parameters"]["rounding"] == "cut"
    fam = make_family("hard", 3, 1)
    T = fam.all_answers()
    protocol = resolve("trained").protocol
    for point in got["curve"][:6]:
        params = {"weights": str(folder / row["weights"]), "bits": point["bits"],
                  "rounding": "cut"}  # fmt: skip
        ans = _engine_answers(protocol, params, fam, fam.variable_tokens(T), fam.fixed_tokens())
        assert point["accuracy"] == float((ans == T).all(1).mean()), point
    every = measure_weights(folder / row["weights"])
    assert every["rounding"] == "every"
    bad = CliRunner().invoke(main, ["capacity", str(folder), "--rounding", "late"])
    assert bad.exit_code == 2 and "late" in bad.output


def test_training_at_the_cut_rounds_only_the_transcript(tmp_path):
    """--train-rounding cut: the forward pass rounds the state once, after the last data
    token (the engine's rounding=cut), so its outputs are the exact model's continued from
    the rounded cut state; recorded in the row and header; refused where nothing has a cut."""
    import json

    from click.testing import CliRunner

    from sketchsim.cli import main
    from sketchsim.errors import SketchsimError

    fam = make_family("mqar", 2, 3, options={"pairs": 4})
    X = input_tensor(fam, fam.sample_answers(32), torch.float64)
    torch.manual_seed(0)
    model = CausalModel(causal_arch("deltanet", fam.m, 1, 1, 2, 3), fam.q).double()
    quantize = causal_qat_quantizer(model, 3, cut=True)
    with torch.no_grad():
        y = model(X, quantize=quantize)[:, : fam.q]
    n_data = X.shape[1] - fam.q
    assert quantize.calls == {0: X.shape[1]}  # one call per token
    rnd = quantize.rounding
    seen = []

    def at_cut(layer, S):
        seen.append(1)
        return rnd(layer, S) if len(seen) == n_data else S

    with torch.no_grad():
        want = model(X, quantize=at_cut)[:, : fam.q]
        exact = model(X)[:, : fam.q]
    assert torch.equal(y, want) and not torch.equal(y, exact)
    two = CausalModel(causal_arch("deltanet", fam.m, 2, 1, 2, 3), fam.q)
    with pytest.raises(SketchsimError, match="one-layer causal models"):
        causal_qat_quantizer(two, 3, cut=True)
    out = tmp_path / "t.json"
    argv = ["sweep", "--suite", "capacity", "--arch", "deltanet", "--q", "3", "--s", "1",
            "--seeds", "1", "--steps", "3", "--layers", "1", "--ranks", "1",
            "--value-widths", "2", "--train-bits", "4", "--train-rounding", "cut",
            "--json", str(out)]  # fmt: skip
    res = CliRunner().invoke(main, argv)
    assert res.exit_code == 0, res.output
    data = json.loads(out.read_text())
    assert data["header"]["train_rounding"] == "cut"
    assert data["runs"][0]["trained_rounding"] == "cut"
    assert json.loads(_spec("deltanet", train_bits=4, train_rounding="cut").key())[
        "train_rounding"] == "cut"  # fmt: skip
    assert "train_rounding" not in json.loads(_spec("deltanet").key())
    refused = CliRunner().invoke(main, argv[:-6] + ["--train-rounding", "cut"])  # no bits
    assert refused.exit_code == 2 and "only their state has a cut" in refused.output


def test_qat_from_fit_trains_in_float_until_the_stop_rule_then_at_k_bits(tmp_path):
    """--train-bits-from fit: the float phase is the float run itself (it switches at the
    step where the float run stops), and the model is then trained and kept at K bits."""
    kw = dict(feature_map="elu1sum", rank=1, steps=400, lr=0.03, schedule="constant")
    floated = train_capacity(_spec("linear", **kw))
    assert floated["steps"] < 400  # it fits: the switch below has a step to happen at
    row = train_capacity(_spec("linear", train_bits=3, qat_from="fit", **kw), save_to=tmp_path)
    assert row["qat_step"] == floated["steps"]
    assert row["trained_at_bits"] == 3 and row["kept_step"] >= row["qat_step"]
    assert "-K3-fit-" in row["weights"]
    assert load_weights(tmp_path / row["weights"]).header["trained_at_bits"] == 3
    never = train_capacity(_spec("linear", train_bits=3, qat_from="fit", **{**kw, "steps": 2}))
    assert never["qat_step"] is None and never["trained_at_bits"] is None
    assert "qat_from" not in json.loads(_spec("linear", train_bits=3).key())
    assert json.loads(_spec("linear", train_bits=3, qat_from="fit").key())["qat_from"] == "fit"


def test_weight_l1_adds_a_penalty_that_shrinks_the_weights(tmp_path):
    """--weight-l1: the same seeded run with the penalty ends with a smaller L1 norm of its
    weight matrices; the rows and the resume key record it (and only when set)."""
    kw = dict(feature_map="elu1sum", rank=1, steps=60, lr=0.03, schedule="constant",
              stop_below=0.01)  # fmt: skip
    norms = []
    for l1 in (0.0, 0.05):
        row = train_capacity(_spec("linear", weight_l1=l1, **kw), save_to=tmp_path / str(l1))
        assert row["weight_l1"] == l1 and row["steps"] == 60
        arrays = load_weights(tmp_path / str(l1) / row["weights"]).arrays
        norms.append(sum(np.abs(a).sum() for k, a in arrays.items()
                         if k.rsplit(".", 1)[-1] in ("wq", "wk", "wv", "wa", "wu")))  # fmt: skip
    assert norms[1] < 0.8 * norms[0]
    assert "weight_l1" not in json.loads(_spec("linear").key())
    assert json.loads(_spec("linear", weight_l1=0.05).key())["weight_l1"] == 0.05


NOISE_MODELS = [("linear", "elu1sum", 1), ("linear", "elu1", 2), ("based", "elu1", 1)] + [
    (kind, "elu1", heads) for kind in AFFINE_KINDS for heads in (1, 2)
]


@pytest.mark.parametrize("kind, fmap, heads", NOISE_MODELS)
def test_cut_noise_is_the_same_on_every_path(kind, fmap, heads):
    """--train-noise: the one-pass readouts (shared queries, the affine map) add the same
    noise to the cut state as the token loop, drawn in the same order: same outputs and
    gradients for the same seed; and the noise changes the outputs."""
    from sketchsim.experiments.causal_models import CutNoise

    for fam in _sum_families():
        X = input_tensor(fam, fam.sample_answers(40), torch.float64)
        torch.manual_seed(4)
        model = CausalModel(causal_arch(kind, fam.m, 1, heads, 2, 3, fmap), fam.q).double()
        exact = model(X).detach()
        model.cut_noise = CutNoise(2)
        got = []
        for loop in (False, True):
            torch.manual_seed(7)
            if loop and kind not in ("linear", "based"):
                got.append(_outputs_and_gradients(model, X, fam.q, lambda layer, S: S, False))
            else:
                got.append(_outputs_and_gradients(model, X, fam.q, None, loop))
        np.testing.assert_allclose(got[0][0], got[1][0], rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(got[0][1], got[1][1], rtol=1e-8, atol=1e-8)
        assert not torch.allclose(got[0][0][:, : fam.q], exact[:, : fam.q])


def test_cut_noise_is_one_register_step_with_its_gradient():
    """Each entry moves by at most half a step of its batch range (with the headroom);
    the step keeps its gradient, so the range itself is penalized."""
    from sketchsim.experiments.causal_models import HEADROOM, CutNoise

    leaf = torch.tensor([[0.0, 1.0], [2.0, 1.0], [1.0, 5.0]], requires_grad=True)
    S = leaf.view(3, 1, 2)
    torch.manual_seed(0)
    out = CutNoise(3)(S)
    step = torch.tensor([2.0, 4.0]) * (1 + 2 * HEADROOM) / 7
    assert ((out - S).abs().view(3, 2) <= step / 2).all()
    out.sum().backward()
    assert not torch.allclose(leaf.grad, torch.ones_like(leaf))  # the range's gradient


def test_train_noise_trains_and_saves_the_noiseless_model(tmp_path):
    kw = dict(feature_map="elu1sum", rank=1, steps=200, lr=0.03, schedule="constant")
    row = train_capacity(_spec("linear", train_noise=4, **kw), save_to=tmp_path)
    assert row["train_noise"] == 4 and row["weights_refused"] is None
    assert train_capacity(_spec("linear", **kw))["train_noise"] is None
    assert json.loads(_spec("linear", train_noise=4).key())["train_noise"] == 4
    assert "train_noise" not in json.loads(_spec("linear").key())
    from sketchsim.errors import SketchsimError

    with pytest.raises(SketchsimError, match="one-layer causal models in float"):
        train_capacity(_spec("linear", train_noise=4, layers=2, **kw))
