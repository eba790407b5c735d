"""Every row names exactly the model it measured (issue #60, cases 1 to 4 as reported).

1. a file read more than once per unit (replaced during a run); 2. a label naming
another architecture; 3. families merged; 4. sweep files named by part of their run.
"""

import hashlib
import json
import shutil

import numpy as np
import pytest
from click.testing import CliRunner
from weights_files import random_causal_weights, random_weights

from sketchsim.cli import main
from sketchsim.errors import PluginError
from sketchsim.runs import capacity as capacity_run
from sketchsim.runs.capacity import capacity_dir, measure_weights
from sketchsim.sketch.family import HardFamily
from sketchsim.sketch.family_plugins import family_label, make_family
from sketchsim.sketch.plugins import resolve
from sketchsim.sketch.weights_file import load_weights, save_weights_file


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def two(tmp_path_factory):
    """Two models of one shape on F(3, 1): ``a`` answers 0 everywhere (right on 1 of 8
    inputs at every K), ``b`` answers s + 1 (right on none)."""
    tmp = tmp_path_factory.mktemp("two")
    fam = HardFamily(3, 1)
    w = random_weights(tmp / "r.npz", fam, 1, 1, 1, 2, "elu1", seed=0)
    out = []
    for name, bias in (("a", 0.0), ("b", 5.0)):
        arrays = dict(w.arrays)
        for k in ("L0.H0.wa", "L0.H0.ba", "wb"):
            arrays[k] = np.zeros_like(arrays[k])
        arrays["bb"] = np.array([bias])
        head = {k: v for k, v in w.header.items() if k not in ("format", "format_version")}
        out.append(save_weights_file(tmp / f"{name}.npz", head, arrays))
    return out


# ------------------------------------------------------------------ 1. one read per unit


def test_case1_a_file_replaced_during_capacity_measures_its_first_bytes(two, tmp_path, monkeypatch):
    a, b = two
    path = tmp_path / "m.npz"
    shutil.copy(a, path)
    engine = capacity_run._engine_answers
    calls = []

    def flip(*args):  # after the first K, the file holds the other model
        calls.append(1)
        if len(calls) == 1:
            shutil.copy(b, path)
        return engine(*args)

    monkeypatch.setattr(capacity_run, "_engine_answers", flip)
    row = measure_weights(path, samples=64)
    assert len(calls) > 1
    assert sha(path) == sha(b)
    # every K and the measurement describe model a: right on 1 of 8, at every K
    assert row["weights_sha256"] == sha(a)
    assert {p["accuracy"] for p in row["curve"]} == {0.125}
    assert row["correct_fraction"] == 0.125 and row["bits_per_coordinate"] is None
    assert row["decoded"] is False


def test_case1_a_protocol_run_measures_the_bytes_its_spec_resolved(two, tmp_path):
    a, b = two
    path = tmp_path / "m.npz"
    shutil.copy(a, path)
    r = resolve(f"trained:weights={path},bits=4")
    assert r.params["sha256"] == sha(a)
    fam = HardFamily(3, 1)
    ctx = fam.context()
    first = r.protocol.plan(ctx, r.params)
    shutil.copy(b, path)  # replaced: the run goes on with the bytes it read
    again = r.protocol.plan(ctx, {**r.params, "bits": 5})
    assert np.array_equal(first.aux[-1:], again.aux[-1:])  # bb: model a's
    assert first.aux[-1] == 0.0


def test_case1_a_file_replaced_before_its_first_load_is_refused(two, tmp_path):
    a, b = two
    path = tmp_path / "n.npz"
    shutil.copy(a, path)
    pinned = sha(a)
    shutil.copy(b, path)
    with pytest.raises(PluginError, match="changed during the run"):
        load_weights(path, sha256=pinned[:-1] + ("0" if pinned[-1] != "0" else "1"))
    res = run("transcript", "--q", "3", "--s", "1", "--quiet", "--protocol",
              f"trained:weights={path},bits=4,sha256={pinned[:-1]}0")  # fmt: skip
    assert res.exit_code == 2 and "another file than the one named" in res.output


# --------------------------------------------------------------- 2. labels and plug-ins


def _relabel(src, dst, label):
    w = load_weights(src)
    head = {k: v for k, v in w.header.items() if k not in ("format", "format_version")}
    np.savez(dst, **{**dict(w.arrays), "header": np.frombuffer(
        json.dumps({**w.header, "label": label}).encode(), dtype=np.uint8)})  # fmt: skip
    return head


@pytest.mark.parametrize(
    "label",
    ["gla L1 H1 r1 d2", "GLA L1 H1 r1 d2", "deltanet L1 H1 r1 d2", "linear-elu1 L1 H1 r1 d2",
     "relu L1 H1 r1 d2", "mine  L1 H1 r1 d2", "mine L1 H1 r1 d2 ", "mi ne L1 H1 r1 d2"],
)  # fmt: skip
def test_case2_a_kernel_label_naming_another_model_is_refused(two, tmp_path, label):
    path = tmp_path / "x.npz"
    _relabel(two[0], path, label)
    with pytest.raises(PluginError, match="does not describe its architecture"):
        load_weights(path)


def test_case2_a_plugin_label_is_its_name_and_the_rows_say_so(two, tmp_path):
    folder = tmp_path / "W"
    folder.mkdir()
    _relabel(two[0], folder / "p.npz", "tied L1 H1 r1 d2")
    shutil.copy(two[0], folder / "q.npz")
    result = capacity_dir(folder, samples=64, references=False)
    rows = {r["weights"]: r for r in result["rows"]}
    assert rows["p.npz"]["architecture"] == "tied L1 H1 r1 d2"
    assert rows["p.npz"]["plugin"] == "tied"
    assert rows["q.npz"]["architecture"] == "elu1 L1 H1 r1 d2" and rows["q.npz"]["plugin"] is None
    # grouped apart: a plug-in never counts as a seed of the built-in model
    assert sorted(s["architecture"] for s in result["summary"]) == [
        "elu1 L1 H1 r1 d2", "tied L1 H1 r1 d2"]  # fmt: skip


@pytest.mark.parametrize("label", ["gla  L1 H1 r2 d4", "gla L1 H1 r2 d4", "linear-elu1 L1 H1 r2 d4",
                                   "elu1 L1 H1 r2 d4", "mine L1 H1 r2 d4 w0"])  # fmt: skip
def test_case2_a_causal_label_naming_another_model_is_refused(tmp_path, label):
    fam = HardFamily(3, 1)
    w = random_causal_weights(tmp_path / "d.npz", fam, "deltanet", 1, 1, 2, 4)
    assert w.header.get("label") is None
    _relabel(tmp_path / "d.npz", tmp_path / "x.npz", label)
    with pytest.raises(PluginError, match="does not describe its architecture"):
        load_weights(tmp_path / "x.npz")
    _relabel(tmp_path / "d.npz", tmp_path / "y.npz", "deltanet L1 H1 r2 d4")
    assert load_weights(tmp_path / "y.npz").header["label"] == "deltanet L1 H1 r2 d4"


@pytest.mark.parametrize("name", ["gla", "GLA", "deltanet", "elu1", "linear-relu", "softmax",
                                  "kernel", "my layer"])  # fmt: skip
def test_case2_a_model_plugin_may_not_take_a_builtin_name(tmp_path, name):
    from sketchsim.experiments.model_plugins import resolve_model

    with pytest.raises(PluginError, match="may not be named|model plug-in's name is"):
        resolve_model(f"{tmp_path / 'layer.py'}:{name}")
    res = run("sweep", "--suite", "capacity", "--q", "2", "--s", "1", "--seeds", "1", "--steps",
              "1", "--model-plugin", f"{tmp_path / 'layer.py'}:{name}")  # fmt: skip
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output and len(res.output.strip().splitlines()) == 1


def test_case2_a_plugin_editing_its_arch_changes_no_recorded_architecture():
    torch = pytest.importorskip("torch")
    from sketchsim.experiments.causal_models import CausalLayer, CausalModel, causal_arch

    class Editing(CausalLayer):
        def __init__(self, arch, index=0):
            arch["feature_map"] = "relu"  # in place: the model's own dict must not change
            arch["rank"] = 7
            super().__init__(arch, index)

    torch.manual_seed(0)
    arch = causal_arch("linear", 4, 2, 1, 1, 2, "elu1")
    model = CausalModel(arch, 2, layer_type=Editing)
    assert model.arch == arch
    assert arch["feature_map"] == "elu1" and arch["rank"] == 1


# ----------------------------------------------------------------------- 3. families


def test_case3_families_with_other_options_are_other_families(tmp_path):
    folder = tmp_path / "W"
    folder.mkdir()
    for pairs in (6, 8):
        fam = make_family("mqar", 4, 1, 0, {"pairs": pairs})
        random_weights(folder / f"p{pairs}.npz", fam, 1, 1, 1, 2, "elu1", seed=pairs)
    result = capacity_dir(folder, samples=256)
    fams = sorted(r["family"] for r in result["rows"])
    assert fams == ["mqar:keys=6,pairs=6", "mqar:keys=8,pairs=8"]
    assert [s["seeds"] for s in result["summary"]] == [1, 1]
    assert [f["models"] for f in result["frontier"]] == [1, 1]
    # the kv-sum reference measured on each row's own family
    refs = {r["family"]: r for r in result["references"]}
    assert sorted(refs) == fams
    for pairs in (6, 8):
        fam = make_family("mqar", 4, 1, 0, {"pairs": pairs})
        from sketchsim.sketch.measure import choose_answers, measure

        r = resolve("kv-sum")
        want = measure(fam, choose_answers(fam, None, 256)[1], r.protocol, r.params)
        assert refs[family_label(fam)]["transcript_bits"] == want.declared_bits


def test_case3_family_label_names_options_and_seed():
    assert family_label(make_family("mqar", 4, 3)) == "mqar"
    assert family_label(make_family("mqar", 4, 3, 0, {"pairs": 4})) == "mqar"
    assert family_label(make_family("mqar", 4, 3, 0, {"keys": 16})) == "mqar:keys=16"
    assert family_label(make_family("hard", 4, 3, 2)) == "hard seed 2"


# ------------------------------------------------------------------- 4. sweep files

TINY = ["sweep", "--suite", "capacity", "--q", "2", "--s", "1", "--seeds", "1", "--layers", "1",
        "--arch", "linear", "--ranks", "1", "--value-widths", "2"]  # fmt: skip


def test_case4a_json_at_a_weights_name_is_refused_before_training(tmp_path):
    w = tmp_path / "w7"
    res = run(*TINY, "--steps", "2", "--save-weights", w, "--json", w / "x.npz")
    assert res.exit_code == 2, res.output
    assert "inside --save-weights" in res.output and len(res.output.strip().splitlines()) == 1
    assert not list(w.glob("*.npz")) if w.exists() else True


@pytest.mark.slow
def test_case4b_runs_that_differ_in_steps_write_distinct_files_and_resume_rechecks(tmp_path):
    w = tmp_path / "w"
    rows = {}
    for steps in (5, 3):
        out = tmp_path / f"s{steps}.json"
        res = run(*TINY, "--steps", steps, "--save-weights", w, "--json", out)
        assert res.exit_code == 0, res.output
        rows[steps] = json.loads(out.read_text())["runs"][0]
    assert rows[5]["weights"] != rows[3]["weights"]
    for row in rows.values():  # each JSON still names the file it wrote, unchanged
        assert sha(w / row["weights"]) == row["weights_sha256"]
    # 4c: a kept row whose file was replaced is trained again on --resume
    out = tmp_path / "s5.json"
    path = w / rows[5]["weights"]
    shutil.copy(w / rows[3]["weights"], path)
    res = run(*TINY, "--steps", 5, "--save-weights", w, "--json", out, "--resume")
    assert res.exit_code == 0, res.output
    again = json.loads(out.read_text())["runs"][0]
    assert sha(path) == again["weights_sha256"] != sha(w / rows[3]["weights"])


def test_case1_a_given_sha256_must_be_the_files(two):
    a, b = two
    r = resolve(f"trained:weights={a},sha256={sha(a).upper()}")
    assert r.params["sha256"] == sha(a)
    for bad, why in ((sha(b), "another file than the one named"), ("abc", "64 hex digits")):
        with pytest.raises(PluginError, match=why):
            resolve(f"trained:weights={a},sha256={bad}")


def test_case1_a_frontier_cell_refuses_a_spec_that_now_resolves_elsewhere(two, tmp_path):
    from sketchsim.errors import SketchsimError
    from sketchsim.runs.frontier import FrontierPlan, measure_cell

    path = tmp_path / "m.npz"
    shutil.copy(two[0], path)
    spec = f"trained:weights={path}"
    first = resolve(spec).identity
    plan = FrontierPlan((spec,), "bits=1..2", (3,), (1,))
    cell = measure_cell(plan, 3, 1, spec, identity=first)
    assert cell["identity"] == first
    shutil.copy(two[1], path)  # replaced between two cells of one run
    with pytest.raises(SketchsimError, match="changed during the run"):
        measure_cell(plan, 3, 1, spec, identity=first)


def test_case4c_a_run_kept_without_a_file_is_trained_again_when_one_is_asked(tmp_path):
    from sketchsim.experiments.capacity_suite import _kept

    row = {"spec": {"model": "causal"}, "weights": None, "weights_refused": None}
    assert _kept(row, None) is row  # no folder asked: kept
    assert _kept(row, tmp_path) is None  # a folder asked: trained again, its file written
    refused = {**row, "weights_refused": "not finite"}
    assert _kept(refused, tmp_path) is refused
    soft = {"spec": {"model": "softmax"}, "weights": None, "weights_refused": None}
    assert _kept(soft, tmp_path) is soft
