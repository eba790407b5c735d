"""The readout basis (docs/theory.md 5.3): an exact change of a causal model's value basis
that puts one query's readout in each register, and ``--rebase-at`` training."""

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from sketchsim.errors import SketchsimError  # noqa: E402
from sketchsim.experiments.capacity_suite import (  # noqa: E402
    CapacitySpec,
    input_tensor,
    train_capacity,
)
from sketchsim.experiments.causal_models import CausalModel, causal_arch  # noqa: E402
from sketchsim.experiments.plan import default_plan  # noqa: E402
from sketchsim.experiments.state_basis import (  # noqa: E402
    REBASE_KINDS,
    readout_basis,
    readout_matrix,
)
from sketchsim.runs.capacity import measure_weights  # noqa: E402
from sketchsim.sketch.family import HardFamily  # noqa: E402
from sketchsim.sketch.trained import load_weights  # noqa: E402


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)


def _model(kind, fam, heads, r, d, fmap="elu1", seed=0):
    torch.manual_seed(seed)
    arch = causal_arch(kind, fam.m, 1, heads, r, d, fmap, window=3 if kind == "window" else 0)
    return CausalModel(arch, fam.q).double()


@pytest.mark.parametrize("kind", REBASE_KINDS)
@pytest.mark.parametrize("heads, r, extra", [(1, 1, 0), (2, 2, 2)])
def test_the_readout_basis_keeps_every_output_and_reads_one_query_per_register(
    kind, heads, r, extra
):
    fam = HardFamily(3, 3, seed=2)
    T = fam.all_answers()
    x = input_tensor(fam, T, torch.float64)
    fmaps = ["elu1", "elu1sum", "signed"] if kind == "linear" else ["elu1"]
    for fmap in fmaps:
        model = _model(kind, fam, heads, r, fam.q + extra, fmap)
        with torch.no_grad():
            before = model(x)
            readout_basis(model, x[0, : fam.q])
            after = model(x)
        # the same model: outputs equal to float64 rounding, on all 64 inputs
        assert torch.allclose(before, after, rtol=0, atol=1e-9), (kind, fmap)
        layer = model.layers[0]
        with torch.no_grad():
            a = layer.wa(2 * x[0, : fam.q] - 1).view(fam.q, heads, -1)
        want = torch.eye(fam.q, fam.q + extra, dtype=torch.float64)
        for h in range(heads):  # query i reads register i of every head, and no other
            assert torch.allclose(a[:, h], want, atol=1e-9), (kind, fmap, h)


def test_readout_matrix_completes_the_rows_and_refuses_what_has_no_such_basis():
    rng = np.random.default_rng(0)
    A = rng.normal(size=(3, 5))
    R = readout_matrix(A)
    assert R.shape == (5, 5) and np.allclose(R[:3], A)
    assert np.allclose(R[3:] @ A.T, 0) and np.allclose(R[3:] @ R[3:].T, np.eye(2))
    with pytest.raises(SketchsimError, match="value width >= q"):
        readout_matrix(rng.normal(size=(4, 3)))
    with pytest.raises(SketchsimError, match="not finite"):
        readout_matrix(np.where(np.eye(3, 5) > 0, np.nan, A))
    dependent = np.vstack([A[:2], A[0] + A[1]])
    with pytest.raises(SketchsimError, match="not linearly independent"):
        readout_matrix(dependent)


def test_mamba_and_two_layers_are_refused():
    fam = HardFamily(2, 1)
    x = input_tensor(fam, fam.all_answers(), torch.float64)
    with pytest.raises(SketchsimError, match="one-layer causal models"):
        readout_basis(_model("mamba", fam, 1, 1, 2), x[0, :2])
    arch = causal_arch("linear", fam.m, 2, 1, 1, 2, "elu1")
    with pytest.raises(SketchsimError, match="one-layer causal models"):
        readout_basis(CausalModel(arch, fam.q), x[0, :2])


def _spec(**kw):
    base = dict(family="hard", q=3, s=3, model="causal", layers=1, heads=1, rank=1,
                value_width=3, feature_map="elu1sum", seed=0, steps=40, lr=0.01,
                arch="linear", keep="best", schedule="constant")  # fmt: skip
    base.update(kw)
    return CapacitySpec(**base)


def test_rebase_at_trains_on_in_the_readout_basis_and_says_so(tmp_path):
    row = train_capacity(_spec(rebase_at=20, train_noise=4), save_to=tmp_path)
    assert row["rebased_step"] == 20 and row["kept_step"] >= 20
    assert row["weights_refused"] is None  # the engine runs the rebased file as trained
    w = load_weights(tmp_path / row["weights"])
    assert w.header["state_basis"] == "readout"
    assert measure_weights(tmp_path / row["weights"])["state_basis"] == "readout"
    # a run that stops before its step is changed at the end: the model it keeps
    early = train_capacity(_spec(rebase_at=40, stop_below=100.0))
    assert early["rebased_step"] == early["kept_step"] == 0
    assert json.loads(_spec(rebase_at=20).key())["rebase_at"] == 20
    assert "rebase_at" not in json.loads(_spec().key())
    assert "rebased_step" not in train_capacity(_spec(steps=2))


def test_rebasing_changes_the_registers_not_the_model(tmp_path):
    # the same seed and steps before the change: the float model's accuracy is its own
    plain = train_capacity(_spec(steps=20, keep="last"), save_to=tmp_path / "a")
    rebased = train_capacity(_spec(steps=20, keep="last", rebase_at=20), save_to=tmp_path / "b")
    assert rebased["rebased_step"] == 20
    assert plain["accuracy"] == rebased["accuracy"]
    assert plain["train_accuracy"] == rebased["train_accuracy"]
    a = load_weights(tmp_path / "a" / plain["weights"])
    b = load_weights(tmp_path / "b" / rebased["weights"])
    assert "state_basis" not in a.header and b.header["state_basis"] == "readout"
    assert not np.allclose(a.arrays["L0.H0.wv"], b.arrays["L0.H0.wv"])


@pytest.mark.parametrize(
    "overrides",
    [
        dict(archs=("mamba",)),
        dict(layer_counts=(2,)),
        dict(value_widths=(2,)),
        dict(rebase_at=11),
        dict(rebase_lr=0.001),  # the onecycle schedule sets its own rates
        dict(rebase_lr=-1.0, schedule="constant"),
    ],
)
def test_the_plan_refuses_rebase_at_where_no_readout_basis_exists(overrides):
    base = default_plan("capacity").with_(steps=10, qs=(3,), ss=(1,), archs=("linear",),
                                          value_widths=(3,), layer_counts=(1,),
                                          rebase_at=5)  # fmt: skip
    assert base.header()["rebase_at"] == 5
    assert "rebase_at" not in default_plan("capacity").header()
    with pytest.raises(SketchsimError, match="rebase_at"):
        base.with_(**overrides)


def test_rebase_lr_is_the_rate_after_the_change():
    # at a rate of 1e-12 the 20 steps after the change leave the rebased model as it was
    kw = dict(keep="last", rebase_at=20)
    still = train_capacity(_spec(steps=40, rebase_lr=1e-12, **kw))
    at_20 = train_capacity(_spec(steps=20, **kw))
    moved = train_capacity(_spec(steps=40, **kw))
    assert still["max_abs_error"] == pytest.approx(at_20["max_abs_error"], abs=1e-6)
    assert moved["max_abs_error"] != pytest.approx(at_20["max_abs_error"], abs=1e-6)
    assert json.loads(_spec(rebase_lr=0.5).key())["rebase_lr"] == 0.5


def test_a_header_naming_another_basis_is_refused(tmp_path):
    from sketchsim.errors import PluginError

    row = train_capacity(_spec(steps=2, rebase_at=1), save_to=tmp_path)
    with np.load(tmp_path / row["weights"]) as z:
        data = {k: z[k] for k in z.files}
    header = json.loads(data["header"].tobytes())
    header["state_basis"] = "\x1b[2Jrotated"
    data["header"] = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
    np.savez(tmp_path / "bad.npz", **data)
    with pytest.raises(PluginError, match="state_basis must be readout or absent"):
        load_weights(tmp_path / "bad.npz")


def test_a_run_that_diverges_before_its_step_keeps_its_row_and_is_not_changed():
    # an infinite rate: non-finite after one step; the row is written, nothing rebased
    row = train_capacity(_spec(lr=float("inf"), keep="last", rebase_at=40, steps=40))
    assert row["rebased_step"] is None
