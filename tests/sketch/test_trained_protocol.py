"""The ``trained`` protocol: a weights file run in the engine equals its NumPy reference.

Weights here are random (NumPy only: the engine side needs no torch); the torch
model is compared in tests/experiments/test_capacity.py.
"""

import json

import naive
import numpy as np
import pytest
from click.testing import CliRunner
from cliutil import assert_error_line
from weights_files import random_weights

from sketchsim.cli import main
from sketchsim.errors import PluginError
from sketchsim.minip.bits import unpack_bits
from sketchsim.sketch.channels import declared_bits
from sketchsim.sketch.engine import Engine
from sketchsim.sketch.family import HardFamily
from sketchsim.sketch.mqar import MQARFamily
from sketchsim.sketch.plugins import resolve
from sketchsim.sketch.trained import (
    head_entries,
    trained_engine,
    trained_plan,
)


def rounded(y, s):
    return np.clip(np.floor(y + 0.5), -1, s + 1).astype(np.int64)


def engine_answers(w, family, T, bits, python=False):
    """The engine's run as the ``trained`` protocol runs it (its cached loop), or the
    plain-Python engine of the same plan."""
    ctx = family.context()
    if python:
        eng = Engine(trained_plan(ctx, w, bits), ctx, "trained", python=True)
    else:
        eng = trained_engine(ctx, w, bits)
    res = eng.run(family.variable_tokens(T), store=True, fixed=family.fixed_tokens())
    return res, eng.plan


@pytest.mark.parametrize("fmap", ["elu1", "relu", "signed", "softplus"])
# (2, 1, 9, 11): eight-row blocks of the affine maps plus their tail, on two layers;
# (1, 3, 2, 3): one layer's readout of the cache (answer without _forward) over heads
@pytest.mark.parametrize(
    "layers, heads, r, d",
    [(1, 1, 1, 4), (1, 3, 2, 3), (2, 2, 3, 2), (2, 4, 2, 3), (2, 1, 9, 11)],
)
def test_engine_equals_numpy_reference_on_every_input(tmp_path, fmap, layers, heads, r, d):
    fam = HardFamily(3, 3, seed=1)  # 64 inputs: all of them
    T = fam.all_answers()
    w = random_weights(tmp_path / "w.npz", fam, layers, heads, r, d, fmap, calibrate_on=T)
    X = unpack_bits(fam.tokens(T), fam.m)
    for bits in (32, 6, 2, 1):
        res, plan = engine_answers(w, fam, T, bits)
        ref = rounded(naive.trained_outputs(w, X, bits)[:, : fam.q], fam.s)
        assert np.array_equal(res.answers, ref), bits
        # the sketch of layer 1 is a sum of K-bit codes, saturated: within 0..2^K-1
        assert res.transcripts.min() >= 0 and res.transcripts.max() <= 2**bits - 1
        E = head_entries(r, d, fmap)
        assert declared_bits(plan.layers, fam.n_tokens) == layers * heads * E * bits
    # at 32 bits the fixed point does not change a single rounded answer
    exact = rounded(naive.trained_outputs(w, X)[:, : fam.q], fam.s)
    assert np.array_equal(engine_answers(w, fam, T, 32)[0].answers, exact)


def test_python_engine_runs_the_same_functions(tmp_path):
    fam = HardFamily(2, 3, seed=0)
    T = fam.all_answers()
    w = random_weights(tmp_path / "w.npz", fam, 2, 2, 2, 2, "elu1", calibrate_on=T)
    jit, _ = engine_answers(w, fam, T, 5)
    py, _ = engine_answers(w, fam, T, 5, python=True)
    assert np.array_equal(jit.answers, py.answers)
    assert np.array_equal(jit.transcripts, py.transcripts)


def test_sampled_large_family_and_mqar(tmp_path):
    fam = HardFamily(16, 3, seed=0)
    T = fam.sample_answers(300)
    w = random_weights(tmp_path / "h.npz", fam, 1, 2, 2, 8, "relu", calibrate_on=T[:100])
    X = unpack_bits(fam.tokens(T), fam.m)
    res, _ = engine_answers(w, fam, T, 32)
    # on the calibration inputs 32-bit registers give the exact model's answers ...
    assert np.array_equal(res.answers[:100], rounded(naive.trained_outputs(w, X[:100])[:, :16], 3))
    # ... and on the others they saturate (never wrap) as the reference's registers do
    for bits in (32, 3):
        res, _ = engine_answers(w, fam, T, bits)
        assert np.array_equal(res.answers, rounded(naive.trained_outputs(w, X, bits)[:, :16], 3))
    mq = MQARFamily(3, 3, seed=2, keys=8, pairs=5)
    T = mq.all_answers()
    w = random_weights(tmp_path / "m.npz", mq, 2, 1, 2, 3, "signed", calibrate_on=T)
    res, _ = engine_answers(w, mq, T, 32)
    X = unpack_bits(mq.tokens(T), mq.m)
    assert np.array_equal(res.answers, rounded(naive.trained_outputs(w, X)[:, :3], 3))


def test_spec_resolves_and_refuses_another_family_size(tmp_path):
    fam = HardFamily(3, 1)
    random_weights(tmp_path / "w.npz", fam, 1, 1, 1, 2, "elu1")
    r = resolve(f"trained:weights={tmp_path / 'w.npz'},bits=7")
    assert r.protocol.name == "trained" and r.params["bits"] == 7
    plan = r.protocol.plan(fam.context(), r.params)
    assert plan.layers[0].levels == 2**7
    with pytest.raises(PluginError, match="trained for hard q=3, s=1"):
        r.protocol.plan(HardFamily(4, 1).context(), r.params)


def _corrupt(tmp_path, how):
    fam = HardFamily(2, 1)
    path = tmp_path / "w.npz"
    random_weights(path, fam, 1, 1, 1, 2, "elu1")
    with np.load(path) as z:
        data = {k: z[k] for k in z.files}
    header = json.loads(data["header"].tobytes())
    if how == "nan":
        data["L0.H0.wq"][0, 0] = np.nan
    elif how == "shape":
        data["L0.H0.wv"] = np.zeros((3, 3))
    elif how == "missing":
        del data["L0.H0.span"]
    elif how == "header":
        data["header"] = np.frombuffer(b"{not json", dtype=np.uint8)
    elif how == "format":
        header["format"] = "pytorch"
        data["header"] = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
    elif how == "layers":
        header["architecture"]["layers"] = 0
        data["header"] = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
    out = tmp_path / f"{how}.npz"
    np.savez(out, **data)
    return out


@pytest.mark.parametrize(
    "how, needle",
    [
        ("nan", "non-finite"),
        ("shape", "L0.H0.wv has shape (3, 3)"),
        ("missing", "L0.H0.span is missing"),
        ("header", "header is not JSON"),
        ("format", "not a sketchsim-trained file"),
        ("layers", "layers must be an integer in 1..8"),
    ],
)
def test_malformed_weights_are_one_line_exit_2(tmp_path, how, needle):
    path = _corrupt(tmp_path, how)
    argv = [
        "transcript",
        "--q",
        "2",
        "--s",
        "1",
        "--quiet",
        "--protocol",
        f"trained:weights={path}",
    ]
    assert_error_line(CliRunner().invoke(main, argv), needle, only_line=False)


@pytest.mark.parametrize(
    "spec, needle",
    [
        ("trained:weights=MISSING", "no such file"),
        ("trained:weights=GARBAGE", "not a readable .npz"),
        ("trained", "needs weights=PATH"),
        ("trained:weights=GOOD,bits=33", "bits must be <= 32, got 33"),
        ("trained:weights=GOOD,bits=0", "bits must be >= 1"),
    ],
)
def test_hostile_specs_are_one_line_exit_2(tmp_path, spec, needle):
    random_weights(tmp_path / "good.npz", HardFamily(2, 1), 1, 1, 1, 2, "elu1")
    (tmp_path / "garbage.npz").write_bytes(b"PK\x03\x04 not a zip")
    spec = (
        spec.replace("MISSING", str(tmp_path / "none.npz"))
        .replace("GARBAGE", str(tmp_path / "garbage.npz"))
        .replace("GOOD", str(tmp_path / "good.npz"))
    )
    argv = ["transcript", "--q", "2", "--s", "1", "--quiet", "--protocol", spec]
    assert_error_line(CliRunner().invoke(main, argv), needle, only_line=False)


@pytest.mark.parametrize("q, s, seed", [(3, 1, 0), (4, 3, 2), (2, 7, 5)])
def test_the_token_layout_docs_theory_states(q, s, seed):
    """docs/theory.md 5.2, built from its words alone: queries first (block i and the pad),
    then the data token with t_i ones at perm[i][:t_i], perm[i] = i s + successive draws."""
    fam = HardFamily(q, s, seed)
    rng = np.random.default_rng(seed)
    perm = [i * s + rng.permutation(s) for i in range(q)]
    T = np.random.default_rng(9).integers(0, s + 1, (20, q))
    m = q * s + s + 1
    want = np.zeros((len(T), q + 1, m), dtype=np.uint8)
    for i in range(q):
        want[:, i, i * s : (i + 1) * s] = 1
        want[:, i, q * s : q * s + s + 1] = 1
    for b, t in enumerate(T):
        for i in range(q):
            want[b, q, perm[i][: t[i]]] = 1
    assert fam.m == m
    assert np.array_equal(unpack_bits(fam.tokens(T.astype(np.uint8)), m), want)


def test_a_model_of_another_seed_is_refused_unless_allowed(tmp_path):
    # same q, s and m, another bit layout: the plan's size check cannot see it
    path = tmp_path / "w.npz"
    random_weights(path, HardFamily(2, 1, seed=3), 1, 1, 1, 2, "elu1")
    argv = ["transcript", "--q", "2", "--s", "1", "--quiet", "--protocol"]
    spec = f"trained:weights={path},bits=6"
    res = CliRunner().invoke(main, [*argv, spec])
    assert_error_line(res, "trained on another family: seed 3 (this run: 0)", only_line=False)
    assert "other_family=allow" in res.output
    for extra, more in (("", ["--seed", "3"]), (",other_family=allow", [])):
        res = CliRunner().invoke(main, [*argv, spec + extra, *more])
        assert res.exit_code == 0, res.output
    # the library's measure() runs the same preflight (the protocol's, not a name check)
    from sketchsim.errors import PluginError
    from sketchsim.sketch.inputs import resolve_protocols
    from sketchsim.sketch.measure import measure

    ((_, r),) = resolve_protocols([spec])
    fam = HardFamily(2, 1, seed=0)
    with pytest.raises(PluginError, match="^protocol trained: weights file .* seed 3"):
        measure(fam, np.zeros((1, 2), dtype=np.int64), r.protocol, r.params)


def test_family_difference_names_each_field_and_escapes_the_header(tmp_path):
    import copy

    from sketchsim.sketch.trained import Weights, family_difference, load_weights

    fam = HardFamily(2, 1, seed=1)
    path = tmp_path / "w.npz"
    random_weights(path, fam, 1, 1, 1, 2, "elu1")
    w = load_weights(path)
    assert family_difference(w, fam) == ""
    w = Weights(copy.deepcopy(w.header), w.arrays)  # not the loader's cached one
    w.header["family"].update(name="hard\x1b[2J", options={"x": 1})
    text = family_difference(w, HardFamily(2, 1, seed=4))
    assert text.startswith("name 'hard\\x1b[2J' (this run: 'hard'); seed 1 (this run: 4)")
    assert "options {'x': 1}" in text and "\x1b" not in text
