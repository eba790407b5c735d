"""Weights files are untrusted input (issue 47): each numbered case of the issue, as reported.

1. a result resumed after the file changed under the same path; 2. an output written
over an input; 4. header claims shown as measurements; 5. tracebacks from header fields;
6. a small file that expands into gigabytes, and a file loaded once per K; 7. unclear
messages; 8. a row describing another model; 9. one bad file sinking a folder.
"""

import json
import os
import time
import zipfile

import numpy as np
import pytest
from click.testing import CliRunner
from cliutil import assert_error_line
from weights_files import random_weights

from sketchsim.cli import main
from sketchsim.errors import PluginError
from sketchsim.runs.capacity import accuracy_check, measure_weights
from sketchsim.sketch import trained, weights_file
from sketchsim.sketch.family import HardFamily
from sketchsim.sketch.plugins import resolve
from sketchsim.sketch.weights_file import MAX_ARRAY_BYTES, MIN_SPAN, load_weights


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def _rewrite(path, out=None, header=None, arrays=None, extra=None):
    """A copy of the weights file ``path`` with header fields / arrays replaced (plain savez)."""
    with np.load(path) as z:
        data = {k: z[k] for k in z.files}
    head = json.loads(data["header"].tobytes())
    for key, value in (header or {}).items():
        if value is KeyError:
            head.pop(key, None)
        else:
            head[key] = value
    data["header"] = np.frombuffer(json.dumps(head).encode(), dtype=np.uint8)
    data.update(arrays or {})
    data.update(extra or {})
    out = out or path
    np.savez(out, **data)
    return out


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Two models of the same shape on F(3, 1) whose answers differ: every answer 0 (right
    on 1 of the 8 inputs), and every answer s + 1 (never right)."""
    tmp = tmp_path_factory.mktemp("w")
    fam = HardFamily(3, 1)
    random_weights(tmp / "r.npz", fam, 1, 1, 1, 2, "elu1", seed=0)
    w = load_weights(tmp / "r.npz")
    quiet = {k: np.zeros_like(w.arrays[k]) for k in ("L0.H0.wa", "L0.H0.ba", "wb")}
    for name, bias in (("a", 0.0), ("b", 5.0)):
        _rewrite(tmp / "r.npz", tmp / f"{name}.npz", arrays={**quiet, "bb": np.array([bias])})
    return tmp / "a.npz", tmp / "b.npz"


def _fraction(path):
    return json.loads(path.read_text())["protocols"][0]["correct_fraction"]


# ------------------------------------------------------------------ 1. resume by content


def test_case1_transcript_resume_measures_a_replaced_file_again(tmp_path, files):
    a, b = files[0], files[1]
    w = tmp_path / "wr.npz"
    spec = f"trained:weights={w},bits=4"
    base = ("transcript", "--q", "3", "--s", "1", "--quiet", "--protocol", spec)
    fresh = {}
    for name, src in (("a", a), ("b", b)):
        w.write_bytes(src.read_bytes())
        assert run(*base, "--json", tmp_path / f"{name}.json").exit_code == 0
        fresh[name] = _fraction(tmp_path / f"{name}.json")
    assert (fresh["a"], fresh["b"]) == (0.125, 0.0)
    w.write_bytes(a.read_bytes())
    out = tmp_path / "rs.json"
    assert run(*base, "--json", out).exit_code == 0
    w.write_bytes(b.read_bytes())  # replaced under the same path
    res = run(*base, "--json", out, "--resume")
    assert res.exit_code == 0, res.output
    assert _fraction(out) == fresh["b"]
    assert json.loads(out.read_text())["protocols"][0]["identity"].endswith(
        resolve(spec).identity.split(" + ")[-1]
    )


def test_case1_frontier_resume_measures_a_replaced_file_again(tmp_path, files):
    a, b = files[0], files[1]
    w = tmp_path / "wr.npz"
    args = ("frontier", "--vary", "bits=1..6", "--q", "3", "--s", "1", "--quiet",
            "--protocol", f"trained:weights={w}")  # fmt: skip
    cells = {}
    for name, src in (("a", a), ("b", b)):
        w.write_bytes(src.read_bytes())
        assert run(*args, "--json", tmp_path / f"{name}.json").exit_code == 0
        cells[name] = json.loads((tmp_path / f"{name}.json").read_text())["cells"][0]["evaluated"]
    assert set(cells["a"].values()) == {0.125} and set(cells["b"].values()) == {0.0}
    w.write_bytes(a.read_bytes())
    out = tmp_path / "fr.json"
    assert run(*args, "--json", out).exit_code == 0
    w.write_bytes(b.read_bytes())
    assert run(*args, "--json", out, "--resume").exit_code == 0
    assert json.loads(out.read_text())["cells"][0]["evaluated"] == cells["b"]


def test_identity_holds_the_weights_hash_and_a_missing_file_says_so(tmp_path, files):
    a, b = files[0], files[1]
    ida = resolve(f"trained:weights={a}").identity
    idb = resolve(f"trained:weights={b}").identity
    assert ida != idb and ida.split(" + ")[0] == idb.split(" + ")[0]
    assert "sha256:" in ida.split(" + file weights ")[1]
    assert resolve(f"trained:weights={tmp_path / 'none.npz'}").identity.endswith("missing")


# ------------------------------------------------------------ 2. no output over an input


def test_case2_capacity_json_inside_its_folder_is_refused(tmp_path, files):
    folder = tmp_path / "W2"
    folder.mkdir()
    w = folder / "m.npz"
    w.write_bytes(files[0].read_bytes())
    before = w.read_bytes()
    res = run("capacity", folder, "--json", w)
    assert_error_line(res, "--json would overwrite the input")
    assert "(FOLDER)" in res.output
    assert w.read_bytes() == before


def test_case2_transcript_json_over_the_weights_in_a_spec_is_refused(tmp_path, files):
    w = tmp_path / "w3.npz"
    w.write_bytes(files[0].read_bytes())
    before = w.read_bytes()
    res = run("transcript", "--q", "3", "--s", "1", "--protocol",
              f"trained:weights={w},bits=4", "--json", w)  # fmt: skip
    assert_error_line(res, "--json would overwrite the input")
    assert "(--protocol)" in res.output
    assert w.read_bytes() == before


def test_case2_frontier_plot_over_the_weights_is_refused(tmp_path, files):
    w = tmp_path / "w.png"  # a weights file under a plot's name
    w.write_bytes(files[0].read_bytes())
    res = run("frontier", "--vary", "bits=1..2", "--q", "3", "--s", "1",
              "--protocol", f"trained:weights={w}", "--plot", w)  # fmt: skip
    assert_error_line(res, "--plot would overwrite the input")


# ------------------------------------------------------ 4. and 5. header claims checked


@pytest.mark.parametrize(
    "field, value, needle",
    [
        ("accuracy", 7.5, "accuracy must be a number in [0, 1], got 7.5"),
        ("accuracy", "high", "accuracy must be a number in [0, 1], got 'high'"),
        ("seed", -1, "seed must be an integer >= 0, got -1"),
        ("seed", "1", "seed must be an integer >= 0, got '1'"),
        ("label", ["elu1"], "label must be printable text"),
        ("label", "relu L1 H1 r1 d2", "label 'relu L1 H1 r1 d2' does not describe"),
        ("label", "elu1 L1 H1 r1 d8", "does not describe its architecture"),
        ("family", "SPEC7", "family spec must be a non-empty string, got 7"),
    ],
)
def test_case4_5_header_claims_are_checked(tmp_path, files, field, value, needle):
    if value == "SPEC7":
        head = json.loads(np.load(files[0])["header"].tobytes())
        value = {**head["family"], "spec": 7}
    path = _rewrite(files[0], tmp_path / "h.npz", header={field: value})
    with pytest.raises(PluginError) as err:
        load_weights(path)
    assert needle in str(err.value)
    res = run("transcript", "--q", "3", "--s", "1", "--quiet",
              "--protocol", f"trained:weights={path}")  # fmt: skip
    assert_error_line(res, needle, only_line=False)


def test_case5_label_with_markup_is_refused_and_shown_as_text(tmp_path, files):
    # a label names a model only as sketchsim renders it or as a plug-in NAME (#60): markup
    # is no NAME, so the file is refused, its label shown as text (rich markup not applied)
    folder = tmp_path / "W"
    folder.mkdir()
    _rewrite(files[0], folder / "m.npz", header={"label": "[/bold] L1 H1 r1 d2"})
    _rewrite(files[0], folder / "n.npz")
    out = tmp_path / "c.json"
    res = run("capacity", folder, "--json", out, "--samples", "64")
    assert res.exit_code == 2, res.output  # one file could not be measured
    assert "[/bold] L1 H1 r1 d2" in res.output
    result = json.loads(out.read_text())
    assert [r["weights"] for r in result["rows"]] == ["n.npz"]
    assert "does not describe" in result["unreadable"][0]["reason"]


def test_a_plugin_label_of_the_right_size_is_kept(tmp_path, files):
    path = _rewrite(files[0], tmp_path / "p.npz", header={"label": "tied L1 H1 r1 d2"})
    assert load_weights(path).header["label"] == "tied L1 H1 r1 d2"


# ------------------------------------------------------------- 6. no hang, one load


def _bomb(path, good, member, size):
    """``good`` with one more member of ``size`` zero bytes once decompressed (deflated)."""
    path.write_bytes(good.read_bytes())
    with zipfile.ZipFile(path, "a", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
        with zf.open(member, "w", force_zip64=True) as fh:
            chunk = bytes(1 << 24)
            for _ in range(size // len(chunk)):
                fh.write(chunk)
    return path


@pytest.mark.slow  # deflates 3 GiB of zeros once (about 5 s)
def test_case6_a_3gib_member_is_refused_without_decompressing(tmp_path, files):
    """Was: past 120 s at 3.3 GB of memory (every member read before any check)."""
    path = _bomb(tmp_path / "bomb.npz", files[0], "zz.npy", 3 << 30)
    assert path.stat().st_size < 16 << 20  # a small file (about 14 MB at level 1)
    start = time.perf_counter()
    with pytest.raises(PluginError, match="has no use for: zz.npy"):
        load_weights(path)
    assert time.perf_counter() - start < 5


def test_case6_an_oversized_known_member_and_header_are_refused(tmp_path, files):
    # a known array's member larger than its shape needs (the data is never decompressed)
    with np.load(files[0]) as z:
        data = {k: z[k] for k in z.files}
    del data["L0.H0.wq"]
    plain = tmp_path / "plain.npz"
    np.savez(plain, **data)
    path = _bomb(tmp_path / "big.npz", plain, "L0.H0.wq.npy", 1 << 25)
    with pytest.raises(PluginError, match=r"array L0.H0.wq is 33,554,432 bytes"):
        load_weights(path)
    del data["header"]
    np.savez(plain, **data)
    path = _bomb(tmp_path / "head.npz", plain, "header.npy", 1 << 25)
    with pytest.raises(PluginError, match="header member is 33,554,432 bytes"):
        load_weights(path)


def test_case6_a_huge_declared_architecture_is_refused_before_reading(tmp_path, files):
    head = json.loads(np.load(files[0])["header"].tobytes())
    arch = {**head["architecture"], "rank": 4096, "value_width": 4096, "heads": 8}
    path = _rewrite(files[0], tmp_path / "huge.npz", header={"architecture": arch})
    with pytest.raises(PluginError, match=f"at most {MAX_ARRAY_BYTES // 2**20:,} MiB"):
        load_weights(path)


def test_case6_capacity_parses_a_file_once_for_all_k(tmp_path, files, monkeypatch):
    calls = []
    real = weights_file._read_weights
    monkeypatch.setattr(weights_file, "_read_weights", lambda *a: calls.append(1) or real(*a))
    weights_file._LOADED.clear()
    path = tmp_path / "once.npz"
    path.write_bytes(files[1].read_bytes())
    row = measure_weights(path, samples=64)
    assert len(row["curve"]) == 32 and len(calls) == 1


def test_loaded_arrays_are_read_only(files):
    w = load_weights(files[0])
    with pytest.raises(ValueError):
        w.arrays["wb"][0] = 1.0


# ------------------------------------------------------------------- 7. clear messages


def test_case7_a_fifo_and_a_folder_named_npz_are_named_as_such(tmp_path):
    (tmp_path / "dir.npz").mkdir()
    with pytest.raises(PluginError, match="is a folder, not a weights file"):
        load_weights(tmp_path / "dir.npz")
    os.mkfifo(tmp_path / "fifo.npz")
    with pytest.raises(PluginError, match="is not a regular file"):
        load_weights(tmp_path / "fifo.npz")


def test_case7_a_tiny_span_is_refused_not_a_zero_division(tmp_path, files):
    path = _rewrite(files[0], tmp_path / "span.npz", arrays={"L0.H0.span": np.full(3, 1e-320)})
    res = run("transcript", "--q", "3", "--s", "1", "--quiet",
              "--protocol", f"trained:weights={path},bits=4")  # fmt: skip
    assert_error_line(res, "its register step would underflow", only_line=False)
    assert "ZeroDivisionError" not in res.output
    ok = _rewrite(files[0], tmp_path / "ok.npz", arrays={"L0.H0.span": np.full(3, MIN_SPAN)})
    assert load_weights(ok).arrays["L0.H0.span"][0] == MIN_SPAN


def test_case7_a_width_mismatch_names_what_differs(tmp_path, files):
    head = json.loads(np.load(files[0])["header"].tobytes())
    fam = HardFamily(3, 1)
    w = load_weights(files[0])
    ctx = fam.context()
    bad = trained.Weights({**head, "architecture": {**head["architecture"], "m": ctx.m + 1}}, {})
    with pytest.raises(PluginError, match=f"token bits m={ctx.m + 1} \\(this family: {ctx.m}\\)"):
        trained.trained_plan(ctx, bad, 8)
    assert trained.trained_plan(ctx, w, 8).layers[0].levels == 256


def test_case7_capacity_names_its_argument_not_an_option(tmp_path):
    res = run("capacity", tmp_path / "nothing")
    assert_error_line(res, "is not a folder")
    assert "--folder" not in res.output
    res = run("transcript", "--q", "3", "--s", "1", "--protocol", "trained:weights=none.npz")
    assert_error_line(res, "no such file", only_line=False)
    assert "--weights" not in res.output


# ----------------------------------------------------- 8. and 9. rows and a bad file


def test_case8_capacity_flags_an_accuracy_the_engine_does_not_reproduce(tmp_path, files):
    row = measure_weights(files[0], samples=64)
    honest = row["engine_accuracy_k32"]
    path = _rewrite(
        files[0], tmp_path / "lie.npz", header={"accuracy": 1.0 if honest < 0.5 else 0.0}
    )
    lie = measure_weights(path, samples=64)
    assert lie["accuracy_mismatch"] is True
    assert accuracy_check(honest, honest, 8)["accuracy_mismatch"] is False
    assert accuracy_check(None, 0.5, 8)["accuracy_mismatch"] is None


def test_case9_one_bad_file_does_not_sink_the_folder(tmp_path, files):
    folder = tmp_path / "W"
    folder.mkdir()
    (folder / "a.npz").write_bytes(files[0].read_bytes())
    nan = np.full_like(load_weights(files[0]).arrays["L0.H0.wq"], np.nan)
    _rewrite(files[0], folder / "b.npz", arrays={"L0.H0.wq": nan})
    out = tmp_path / "c.json"
    res = run("capacity", folder, "--json", out, "--samples", "64")
    assert_error_line(res, "1 of 2 weights files could not be measured", only_line=False)
    data = json.loads(out.read_text())
    assert [r["weights"] for r in data["rows"]] == ["a.npz"]
    assert data["unreadable"][0]["weights"] == "b.npz"
    assert "non-finite" in data["unreadable"][0]["reason"]


def test_a_header_member_whose_array_header_lies_is_refused_before_reading(tmp_path, files):
    """Review: the member's size was checked, the size its .npy header declares was not."""
    import io

    from numpy.lib import format as npy

    with np.load(files[0]) as z:
        data = {k: z[k] for k in z.files if k != "header"}
    plain = tmp_path / "plain.npz"
    np.savez(plain, **data)
    fake = io.BytesIO()
    npy.write_array_header_1_0(fake, {"descr": "|u1", "fortran_order": False, "shape": (2**33,)})
    with zipfile.ZipFile(plain, "a", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("header.npy", fake.getvalue() + bytes(1 << 16))
    with pytest.raises(PluginError, match="declares 8,589,934,592 bytes"):
        load_weights(plain)


def test_a_bzip2_member_is_refused(tmp_path, files):
    """bzip2 and lzma members decompress without an output limit: numpy writes neither."""
    path = tmp_path / "bz.npz"
    path.write_bytes(files[0].read_bytes())
    with zipfile.ZipFile(path, "a", compression=zipfile.ZIP_BZIP2) as zf:
        zf.writestr("zz.npy", b"x")
    with pytest.raises(PluginError, match="member zz.npy is not stored or deflated"):
        load_weights(path)
