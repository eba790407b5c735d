import itertools
import json
import math
import os
import signal
import subprocess
import sys
import time

import naive
import numpy as np
import pytest
from click.testing import CliRunner
from cliutil import assert_error_line

from sketchsim.cli import main
from sketchsim.errors import SketchsimError
from sketchsim.heads.attention import make_construction, softmax_threshold
from sketchsim.heads.exhaustive import (
    check_range,
    check_verify_size,
    count_patterns,
    decode_input,
    verify,
)
from sketchsim.minip.kernel import minip_targets


def reference_verify(m, n, construction, beta=2.0, causal=False):
    """Enumerate with the NumPy feature-map path (small sizes only)."""
    X = np.array(list(itertools.product([0, 1], repeat=m * n)), dtype=np.uint8)
    X = X[:, ::-1].reshape(-1, n, m)  # row k of product order == index k, bit 0 first
    head = make_construction(construction, m, beta)
    y = head.evaluate(X, causal=causal)
    t = minip_targets(X)[:, -1:] if causal else minip_targets(X)
    err = np.abs(y - t)
    return err.max(), (err < 0.5).all(axis=1).mean()


@pytest.mark.parametrize(
    "m,n,construction,causal",
    [
        (3, 3, "rank1", False),
        (2, 4, "rank1", True),
        (3, 3, "softmax", False),
        (2, 3, "onehot", False),
        (4, 2, "rank1", False),
        (1, 5, "softmax", True),
    ],
)
def test_jitted_matches_reference(m, n, construction, causal):
    res = verify(m, n, construction, beta=1.2, causal=causal)
    max_err, frac = reference_verify(m, n, construction, beta=1.2, causal=causal)
    assert res.inputs == 2 ** (m * n)
    assert res.max_abs_error == pytest.approx(max_err, abs=1e-12)
    assert res.exact_fraction == pytest.approx(frac)


def test_decode_input_order():
    X = decode_input(0b000110, 3, 2)
    assert X.tolist() == [[0, 1, 1], [0, 0, 0]]


@pytest.mark.parametrize("m", range(1, 9))
@pytest.mark.parametrize("n", [1, 2])
def test_rank1_exact_up_to_two_tokens(m, n):
    res = verify(m, n, "rank1")
    assert res.exact_fraction == 1.0 and res.counterexample is None
    assert res.max_abs_error == 0.0


@pytest.mark.parametrize("m", [2, 3, 4, 5])
def test_rank1_fails_at_n3(m):
    res = verify(m, 3, "rank1")
    ce = res.counterexample
    assert ce is not None and res.exact_fraction < 1
    X = np.array(ce["tokens"])
    assert minip_targets(X)[ce["position"] - 1] == ce["target"]
    assert abs(ce["output"] - ce["target"]) >= 0.5


def test_rank1_at_n3_m1_is_exact():
    # with one bit the N=3 head is still exact: the failure needs m >= 2
    assert verify(1, 3, "rank1").counterexample is None


@pytest.mark.parametrize("m", [4, 6, 8])
def test_softmax_beta2_exact_at_n3(m):
    res = verify(m, 3, "softmax", beta=2.0)
    assert res.counterexample is None
    assert res.max_abs_error < 0.5


def test_softmax_worst_error_m4_beta2_matches_theory():
    assert verify(4, 3, "softmax", 2.0).max_abs_error == pytest.approx(0.213, abs=5e-4)


def test_softmax_below_threshold_fails():
    # at N = 6 the threshold is ln 10 ~ 2.30; beta = 0.5 is far below it
    assert verify(3, 6, "softmax", beta=0.5).counterexample is not None


@pytest.mark.parametrize("m,n", [(2, 5), (3, 4), (4, 3)])
def test_onehot_exact_above_threshold(m, n):
    beta = softmax_threshold(n) + 0.05
    res = verify(m, n, "onehot", beta=beta)
    assert res.counterexample is None and res.rank == 2**m


def test_size_limits():
    with pytest.raises(SketchsimError, match="limit 26"):
        check_verify_size(2, 14)  # too many count vectors: enumerated
    check_verify_size(9, 3)  # 2^27 inputs, but only 165 count vectors
    check_verify_size(26, 2)  # 2^52 inputs, 3,654 count vectors
    with pytest.raises(SketchsimError, match="m must be >= 1, got 0"):
        check_verify_size(0, 3)
    with pytest.raises(SketchsimError, match="n must be >= 1, got 0"):
        check_verify_size(3, 0)
    with pytest.raises(SketchsimError, match="2\\^1026 inputs would take over 1e292 years"):
        check_verify_size(342, 3)  # the estimate used to overflow


NEAR_THRESHOLD = math.log(6) / 2  # exact N = 3 softmax threshold (THEORY 3b): ties at 1/2


@pytest.mark.parametrize(
    "m,n,construction,beta,causal",
    [
        (3, 3, "rank1", 2.0, False),
        (3, 3, "softmax", 1.2, False),
        (3, 3, "softmax", 0.5, True),
        (2, 4, "rank1", 2.0, True),
        (2, 4, "softmax", 0.7, False),
        (1, 5, "softmax", 0.3, False),
        (4, 2, "rank1", 2.0, False),
        (5, 1, "softmax", 2.0, False),
        (1, 1, "rank1", 2.0, False),
        (3, 3, "softmax", NEAR_THRESHOLD, False),
        (2, 3, "onehot", NEAR_THRESHOLD, True),
        (3, 3, "softmax", 30.0, False),
    ],
)
def test_both_paths_bit_identical_to_naive(m, n, construction, beta, causal):
    expected = naive.verify_enumeration(m, n, construction, beta, causal)
    # count vectors (what verify uses at these sizes) and the jitted enumeration
    assert count_patterns(m, n, construction, beta, causal) == expected  # bit for bit
    assert check_range(construction, m, n, beta, causal, 0, 2 ** (m * n)) == expected
    res = verify(m, n, construction, beta=beta, causal=causal)
    max_err, exact, first_bad = expected
    assert res.max_abs_error == max_err
    assert res.exact_fraction == exact / 2 ** (m * n)
    assert (res.counterexample or {"index": -1})["index"] == first_bad


@pytest.mark.parametrize("construction", ["rank1", "softmax"])
def test_verify_enumerates_when_count_vectors_are_too_many(construction, monkeypatch):
    import sketchsim.heads.exhaustive as ver

    counted = verify(3, 3, construction, beta=0.8)
    monkeypatch.setattr(ver, "_PATTERN_CELLS", 0)
    enumerated = verify(3, 3, construction, beta=0.8)
    assert enumerated.to_dict() | {"seconds": 0} == counted.to_dict() | {"seconds": 0}


@pytest.mark.parametrize("construction", ["rank1", "softmax"])
def test_ranges_merge_to_the_whole(construction):
    # arbitrary splits of the enumeration (cluster shards, chunks) give the same totals
    m, n, beta = 3, 3, 0.6
    whole = check_range(construction, m, n, beta, False, 0, 512)
    parts = [
        check_range(construction, m, n, beta, False, a, b - a)
        for a, b in [(0, 7), (7, 200), (200, 201), (201, 512)]
    ]
    bads = [p[2] for p in parts if p[2] >= 0]
    assert max(p[0] for p in parts) == whole[0]
    assert sum(p[1] for p in parts) == whole[1]
    assert min(bads, default=-1) == whole[2]
    assert whole == naive.verify_enumeration(m, n, construction, beta, False)


# -- the command line: one-line errors, Ctrl-C ------------------------------------------


def cli(*args):
    return CliRunner().invoke(main, ["verify", *args])


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--m", "342", "--n", "3"], "exceeds the limit 26"),
        (["--m", str(10**30), "--n", "3"], "exceeds the limit 26"),
        (["--m", "0"], "--m must be >= 1, got 0"),
        (["--n", "-4"], "--n must be >= 1, got -4"),
        (["--beta", "nan"], "--beta must be > 0 and finite, got nan"),
        (["--beta", "inf", "--construction", "rank1"], "> 0 and finite, got inf"),
        (["--beta", "-inf"], "> 0 and finite"),
        (["--beta", "0"], "> 0 and finite"),
    ],
)
def test_cli_bad_sizes_and_beta_are_one_line(args, needle):
    assert_error_line(cli(*args), needle)


def test_cli_construction_names_match_the_library():
    from sketchsim.cli.verify import CONSTRUCTION_NAMES
    from sketchsim.heads.attention import CONSTRUCTIONS

    assert CONSTRUCTION_NAMES == CONSTRUCTIONS


def test_interrupt_keeps_finished_chunks(monkeypatch):
    # a SIGINT between chunks stops the run with the chunks so far, marked incomplete
    import sketchsim.heads.exhaustive as ver

    monkeypatch.setattr(ver.config, "VERIFY_CHUNK", 64)
    monkeypatch.setattr(ver, "_PATTERN_CELLS", 0)  # enumerate, chunk by chunk
    calls = []

    def progress(done, total):
        calls.append(done)
        if len(calls) == 3:
            os.kill(os.getpid(), signal.SIGINT)

    # a known handler to restore: a process started in the background by a
    # non-interactive shell (as CI may be) inherits SIGINT ignored
    outer = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(ver.VerifyInterrupted) as info:
            verify(3, 3, "rank1", progress=progress)
        restored = signal.getsignal(signal.SIGINT)
    finally:
        signal.signal(signal.SIGINT, outer)
    part = info.value.partial
    assert not part.complete and part.checked == 4 * 64 and part.inputs == 512
    max_err, exact, first_bad = check_range("rank1", 3, 3, 2.0, False, 0, 4 * 64)
    assert part.max_abs_error == max_err
    assert part.exact_fraction == exact / (4 * 64)
    assert part.counterexample["index"] == first_bad
    assert restored is signal.default_int_handler


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="waits on /proc thread counts")
def test_ctrl_c_on_a_running_cli_verify_aborts_and_saves_partial_json(tmp_path):
    """SIGINT to a real process inside the parallel kernel: "aborted", exit 1, partial JSON."""
    out = tmp_path / "v.json"
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", NUMBA_NUM_THREADS="2")
    # N = 13: too many count vectors, so the inputs are enumerated (2^26 of them)
    args = ["verify", "--m", "2", "--n", "13", "--construction", "rank1", "--quiet"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "sketchsim", *args, "--json", str(out)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    def threads():
        with open(f"/proc/{proc.pid}/status") as fh:
            return next(int(line.split()[1]) for line in fh if line.startswith("Threads:"))

    deadline = time.monotonic() + 240
    # numba starts its worker threads with the first parallel chunk
    while proc.poll() is None and threads() < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert proc.poll() is None, "verify finished before it could be interrupted"
    time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 1, stderr
    assert "Traceback" not in stderr and "SystemError" not in stderr
    assert stderr.strip().splitlines()[-1] == "aborted"
    data = json.loads(out.read_text())
    assert data["complete"] is False and 0 < data["checked"] < data["inputs"] == 2**26
    assert 0 <= data["exact_fraction"] <= 1


@pytest.mark.parametrize("m,n_types", [(1, 2), (3, 4), (4, 8), (2, 16), (5, 1)])
def test_count_vectors_are_every_composition_once(m, n_types):
    from sketchsim.heads.exhaustive import _count_vectors

    rows = _count_vectors(m, n_types)
    assert rows.shape == (n_types, math.comb(m + n_types - 1, n_types - 1))
    assert (rows >= 0).all() and (rows.sum(axis=0) == m).all()
    assert len({tuple(col) for col in rows.T}) == rows.shape[1]  # no vector twice


@pytest.mark.parametrize("preset", [None, "3"])
def test_cli_verify_starts_numpy_without_an_openblas_pool(preset):
    """verify never calls BLAS, so the CLI imports NumPy with one OpenBLAS thread
    unless the user chose a number."""
    code = (
        "import os, sys\n"
        "from sketchsim.cli import main\n"
        "assert 'numpy' not in sys.modules\n"
        "try:\n"
        "    main(['verify', '--m', '2', '--n', '2', '--quiet'])\n"
        "finally:\n"
        "    print('threads', os.environ.get('OPENBLAS_NUM_THREADS'))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if preset is not None:
        env["OPENBLAS_NUM_THREADS"] = preset
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == f"threads {preset or '1'}"


@pytest.mark.parametrize("construction, beta", [("softmax", NEAR_THRESHOLD - 0.05), ("rank1", 2.0)])
def test_count_vectors_beyond_the_enumeration_limit_match_the_enumeration(construction, beta):
    """m*N = 27 is above the enumeration limit but has 165 count vectors: both agree."""
    from sketchsim.heads.exhaustive import check_range, uses_count_vectors, verify

    assert uses_count_vectors(9, 3) and not uses_count_vectors(2, 14)
    got = verify(9, 3, construction, beta, False)
    err, exact, first_bad = check_range(construction, 9, 3, beta, False, 0, 1 << 27)
    assert got.max_abs_error == err and got.exact_fraction == exact / (1 << 27)
    assert (got.counterexample or {}).get("index", -1) == first_bad
