"""``transcript`` on a Dask cluster: the same report as one process, robust to worker death."""

import importlib.util
import json
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from sketchsim import config
from sketchsim.cluster.sharded_measure import (
    answers_range,
    layout,
    measure_on_cluster,
    plan_cluster_inputs,
    transcript_reduce,
)
from sketchsim.errors import SketchsimError
from sketchsim.sketch.family import HardFamily
from sketchsim.sketch.grouping import (
    entropy_bits,
    entropy_from_size_histogram,
    find_collision_candidates,
    group_transcripts,
)
from sketchsim.sketch.measure import InputLimitError, measure
from sketchsim.sketch.plugins import resolve

pytest.importorskip("distributed")  # the cluster extra is part of dev: CI runs these


@pytest.fixture(scope="module")
def client():
    from sketchsim.cluster.client import connect, parse_cluster

    with connect(parse_cluster("local:2")) as c:
        yield c


@pytest.fixture
def small_shards(monkeypatch):
    """Many map tasks and ranges even for tiny families (layout runs on the client)."""
    monkeypatch.setattr(config, "CLUSTER_TASK_BYTES", 2000)


def _same(one, many):
    one, many = one.to_dict(), many.to_dict()
    one.pop("seconds"), many.pop("seconds")
    assert json.dumps(one, sort_keys=True) == json.dumps(many, sort_keys=True)


# --- pieces, without a cluster ------------------------------------------------------


@pytest.mark.parametrize("q, s", [(3, 3), (5, 1), (2, 300), (1, 7)])
def test_answers_range_is_a_slice_of_the_enumeration(q, s):
    fam = HardFamily(q, s)
    T = fam.all_answers()
    for lo, hi in [(0, 1), (0, T.shape[0]), (T.shape[0] // 3, T.shape[0] - 1)]:
        got = answers_range(fam, lo, hi)
        assert got.dtype == T.dtype
        np.testing.assert_array_equal(got, T[lo:hi])


def _ranges(fp, idx, hashes, partitions, rng, presorted):
    """Cut (fp, idx) like the shuffle: by fingerprint range, rows shuffled or sorted by fp0."""
    from sketchsim.cluster.shuffle import divisions, key_of

    where = np.searchsorted(np.array(divisions(partitions)[1:-1]), key_of(fp[:, 0]), "right")
    out = []
    for p in range(partitions):
        sel = rng.permutation(np.flatnonzero(where == p))
        if presorted:  # as the shuffle delivers them: by key, ties in any order
            sel = sel[np.argsort(fp[sel, 0], kind="stable")]
        out.append((fp[sel, 0], fp[sel, 1], idx[sel], None if hashes is None else hashes[sel]))
    return out


@pytest.mark.parametrize("tie", [False, True])
@pytest.mark.parametrize("hashed", [False, True])
@pytest.mark.parametrize("partitions", [1, 2, 3, 8])
@pytest.mark.parametrize("presorted", [False, True])
def test_reduced_ranges_merge_to_the_single_grouping(hashed, partitions, tie, presorted):
    rng = np.random.default_rng(partitions + 10 * hashed + 100 * tie)
    B = 500
    # few distinct transcripts (so groups and collisions exist), spread over the prefixes
    table = rng.integers(0, 2**63, size=(40, 2), dtype=np.uint64) * np.uint64(2)
    if tie:  # two transcripts whose first fingerprint words agree
        table[1, 0] = table[0, 0]
    fp = table[rng.integers(0, 40, size=B)]
    idx = np.arange(B, dtype=np.int64)
    T = rng.integers(0, 2, size=(B, 3)).astype(np.uint8)  # answers repeat (sampled mode)
    if not hashed:
        T = np.stack([idx // 100, (idx // 10) % 10, idx % 10], axis=1)  # all distinct
    from sketchsim.sketch.fingerprint import answer_hashes

    hashes = answer_hashes(T) if hashed else None
    ranges = _ranges(fp, idx, hashes, partitions, rng, presorted)
    parts = [transcript_reduce(True, *p) for p in ranges]
    _, counts = group_transcripts(fp)
    inverse, _ = group_transcripts(fp)
    assert sum(p["inputs"] for p in parts) == B
    assert sum(p["distinct"] for p in parts) == counts.size
    sizes = np.concatenate([p["sizes"] for p in parts])
    np.testing.assert_array_equal(sizes, counts)  # fingerprint order, bucket after bucket
    assert entropy_bits(sizes) == entropy_bits(counts)
    cands = sorted((c for p in parts for c in p["candidates"]), key=lambda c: c[1])[:8]
    assert cands == find_collision_candidates(inverse, T)
    hist = {}
    for p in parts:
        for c, k in zip(p["size_values"], p["size_counts"], strict=True):
            hist[int(c)] = hist.get(int(c), 0) + int(k)
    # one formula, exactly rounded: the merged histogram gives this process's very number
    assert entropy_from_size_histogram(list(hist), list(hist.values())) == entropy_bits(counts)


def test_reduce_of_distinct_transcripts():
    rng = np.random.default_rng(5)
    fp = rng.integers(0, 2**63, size=(300, 2), dtype=np.uint64)
    fp[7, 0] = fp[3, 0] + np.uint64(1)  # near neighbours
    idx = np.arange(300, dtype=np.int64)
    got = transcript_reduce(True, fp[:, 0], fp[:, 1], idx)
    _, counts = group_transcripts(fp)
    assert got["distinct"] == 300 and got["candidates"] == []
    np.testing.assert_array_equal(got["sizes"], counts)
    assert got["size_values"].tolist() == [1] and got["size_counts"].tolist() == [300]
    fp[9] = fp[4]  # one repeated transcript: the general path
    got = transcript_reduce(True, fp[::-1, 0].copy(), fp[::-1, 1].copy(), idx[::-1].copy())
    assert got["distinct"] == 299 and got["candidates"] == [(4, 9)]


def test_reduce_of_an_empty_range():
    empty = np.zeros(0, np.uint64)
    got = transcript_reduce(True, empty, empty, np.zeros(0, np.int64))
    assert got["inputs"] == got["distinct"] == 0 and got["candidates"] == []


def test_histogram_entropy_edge_cases():
    assert entropy_from_size_histogram([1], [8]) == 3.0  # all distinct
    assert entropy_from_size_histogram([8], [1]) == 0.0  # one group
    assert entropy_from_size_histogram([], []) == 0.0


def test_cluster_limits():
    big = HardFamily(30, 1)  # 2^30 inputs: refused by one process, accepted by a cluster
    assert plan_cluster_inputs(big, True, 10) == ("exhaustive", 1 << 30)
    assert plan_cluster_inputs(HardFamily(4, 3), None, 10) == ("exhaustive", 256)
    assert plan_cluster_inputs(HardFamily(30, 3), None, 10) == ("sampled", 10)
    with pytest.raises(InputLimitError, match="above the cluster limit 2\\^32"):
        plan_cluster_inputs(HardFamily(33, 1), True, 10)
    with pytest.raises(InputLimitError, match="memory limit"):
        plan_cluster_inputs(HardFamily(64, 7), False, 10**12)


@pytest.mark.parametrize("mode, q", [("exhaustive", 30), ("sampled", 64)])
def test_layout_covers_every_input_once_within_the_memory_budget(mode, q):
    from sketchsim.cluster.layout import MAP_BYTES_PER_INPUT, REDUCE_BYTES_PER_INPUT

    budget = config.CLUSTER_TASK_BYTES
    for n, w in [(1, 1), (64, 2), (1000, 3), (1 << 24, 2), (1 << 32, 64)]:
        cut = layout(n, w, mode, q)
        assert cut.shards[0][0] == 0 and cut.shards[-1][1] == n
        assert all(a[1] == b[0] for a, b in zip(cut.shards, cut.shards[1:], strict=False))
        assert cut.partitions >= w
        assert cut.map_bytes <= budget and cut.map_tasks >= min(n, 4 * w)
        assert cut.reduce_bytes <= budget + REDUCE_BYTES_PER_INPUT[mode]
    big = layout(1 << 32, 64, mode, q)  # 96 GiB of rows: a few thousand tasks of <= 256 MiB
    assert big.map_tasks == -(-(1 << 32) // (budget // (q + MAP_BYTES_PER_INPUT[mode])))
    assert big.partitions * budget >= (1 << 32) * REDUCE_BYTES_PER_INPUT[mode]


def test_the_shuffle_graph_grows_with_maps_plus_ranges_not_their_product():
    import dask

    from sketchsim.cluster.shuffle import frame_of, range_partitions

    def graph_size(maps, ranges):
        rows = np.zeros((4, 2), np.uint64)
        tables = [dask.delayed(frame_of)(rows, np.arange(4), None) for _ in range(maps)]
        out = range_partitions(tables, ranges, hashed=False)
        assert len(out) == ranges
        return len(dict(dask.delayed(list)(out).__dask_graph__()))  # distinct tasks

    small, wide = graph_size(8, 8), graph_size(64, 64)
    assert wide < 12 * 64  # a hand-made shuffle cuts 64 x 64 = 4,096 pieces
    assert wide - small < 12 * (64 - 8)


def test_divisions_are_equal_ranges_of_the_key_and_the_key_keeps_the_order():
    from sketchsim.cluster.shuffle import KEY_MAX, KEY_MIN, divisions, key_of

    for p in (1, 2, 3, 1000):
        d = divisions(p)
        assert d[0] == KEY_MIN and d[-1] == KEY_MAX and len(d) == p + 1
        assert all(b > a for a, b in zip(d, d[1:], strict=False))
        widths = np.diff(np.array(d[:-1] + [KEY_MAX + 1], dtype=object))
        assert max(widths) - min(widths) <= 1
    with pytest.raises(ValueError):
        divisions(0)
    words = np.array([0, 1, 2**63 - 1, 2**63, 2**63 + 1, 2**64 - 1], dtype=np.uint64)
    keys = key_of(words)
    assert keys.dtype == np.int64 and (np.diff(keys) > 0).all()
    assert keys[0] == KEY_MIN and keys[-1] == KEY_MAX


# --- on a LocalCluster of 2 processes ---------------------------------------------


@pytest.mark.slow  # numba compiles each protocol in the client and in both workers
@pytest.mark.parametrize("spec", ["block-counts", "clipped-counts", "kernel:bits=6"])
def test_exhaustive_on_cluster_equals_single_process(client, small_shards, spec):
    fam = HardFamily(3, 3, seed=2)
    r = resolve(spec)
    one = measure(fam, fam.all_answers(), r.protocol, r.params, r.source)
    many, stats = measure_on_cluster(client, fam, "hard", spec, r, "exhaustive", 64, workers=2)
    _same(one, many)
    assert stats["map_tasks"] == 8 and stats["partitions"] == 4  # 2,000-byte tasks
    # the engine is built once per worker process, not once per task
    assert len(stats["worker_startup_seconds"]) <= 2 < stats["map_tasks"]
    if spec == "clipped-counts":  # under the bound: a certificate, the same one
        assert many.collision and many.collision["verified"]


@pytest.mark.slow
def test_sampled_on_cluster_equals_single_process(client, small_shards):
    fam = HardFamily(6, 3, seed=1)
    T = fam.sample_answers(300)  # answers repeat: collision candidates compare answers
    for spec in ("clipped-counts", "kernel:bits=6"):
        r = resolve(spec)
        one = measure(fam, T, r.protocol, r.params, r.source)
        many, _ = measure_on_cluster(
            client, fam, "hard", spec, r, "sampled", 300, answers=T, workers=2
        )
        _same(one, many)
    assert one.capped


def test_histogram_entropy_above_the_ordered_limit(client, small_shards, monkeypatch):
    monkeypatch.setattr(config, "CLUSTER_TRANSCRIPT_ORDERED_MAX", 10)
    fam = HardFamily(3, 3)
    r = resolve("clipped-counts")
    one = measure(fam, fam.all_answers(), r.protocol, r.params, r.source).to_dict()
    many, stats = measure_on_cluster(
        client, fam, "hard", "clipped-counts", r, "exhaustive", 64, workers=2
    )
    many = many.to_dict()
    assert stats["entropy_from"] == "group-size histogram"
    assert many.pop("entropy_bits") == pytest.approx(one.pop("entropy_bits"), rel=1e-12)
    one.pop("seconds"), many.pop("seconds")
    assert one == many


_DYING = """
import os

from sketchsim.sketch.family import FamilyType, HardFamily

MARKER = {marker!r}


def _maybe_die(rows):
    if rows > 1 and not os.path.exists(MARKER):
        try:
            from distributed import get_worker

            get_worker()
        except (ImportError, ValueError):
            return  # not on a worker: never dies
        open(MARKER, "w").close()
        os._exit(1)  # this worker process dies mid-task


class Dying(HardFamily):
    def tokens(self, T, out=None):
        _maybe_die(T.shape[0])
        return super().tokens(T, out=out)

    def variable_tokens(self, T, out=None):  # where the family builds only data tokens
        _maybe_die(T.shape[0])
        return super().variable_tokens(T, out=out)


DYING = FamilyType("dying", "kills its first worker", lambda q, s, seed, p: Dying(q, s, seed))
"""


def test_worker_killed_mid_task_does_not_change_the_result(client, small_shards, tmp_path):
    from sketchsim.sketch.family_plugins import resolve_family

    marker = tmp_path / "died"
    path = tmp_path / "dying.py"
    path.write_text(_DYING.format(marker=str(marker)))
    ftype, fparams, _ = resolve_family(f"{path}:DYING")
    fam = ftype.make(3, 3, 0, fparams)
    r = resolve("clipped-counts")
    one = measure(fam, fam.all_answers(), r.protocol, r.params, r.source)
    assert not marker.exists()  # one process: not a worker
    many, _ = measure_on_cluster(
        client, fam, f"{path}:DYING", "clipped-counts", r, "exhaustive", 64, workers=2
    )
    assert marker.exists()  # a worker died and its tasks ran again
    _same(one, many)
    client.wait_for_workers(2, timeout=60)  # the nanny restarts it (later tests count workers)


# --- the command --------------------------------------------------------------------


def _cli(*args):
    from click.testing import CliRunner

    from sketchsim.cli import main

    return CliRunner().invoke(main, list(args))


def _comparable(path):
    data = json.loads(path.read_text())
    for key in ("argv", "cluster"):
        data.pop(key, None)
    for p in data["protocols"]:
        p.pop("seconds"), p.pop("cluster", None)
    return data


@pytest.mark.slow
@pytest.mark.parametrize(
    "mode", [["--exhaustive", "--q", "4", "--s", "2"], ["--samples", "400", "--q", "5"]]
)
def test_cli_same_json_with_and_without_cluster(client, tmp_path, mode):
    one, many = tmp_path / "one.json", tmp_path / "many.json"
    base = ["transcript", *mode, "--protocol", "block-counts", "--protocol", "clipped-counts"]
    res = _cli(*base, "--json", str(one), "--quiet")
    assert res.exit_code == 0, res.output
    address = client.scheduler.address  # the warm workers of this module's cluster
    res = _cli(*base, "--json", str(many), "--quiet", "--cluster", address)
    assert res.exit_code == 0, res.output
    assert "map tasks" in res.output  # the estimate
    # the dashboard link only where Dask can serve it (bokeh installed)
    assert ("dashboard" in res.output) == (importlib.util.find_spec("bokeh") is not None)
    data = json.loads(many.read_text())
    assert data["cluster"] == {"address": address, "worker_threads": 2}
    assert data["protocols"][0]["cluster"]["map_tasks"] >= 1
    assert _comparable(one) == _comparable(many)


def test_cli_cluster_without_the_extra_says_how_to_install(monkeypatch):
    from cliutil import assert_error_line

    monkeypatch.setitem(sys.modules, "distributed", None)
    res = _cli("transcript", "--q", "2", "--s", "2", "--protocol", "raw", "--cluster", "local:1")
    assert_error_line(res, "sketchsim[cluster]", only_line=False)


def test_cli_cluster_bad_values_are_one_line():
    from cliutil import assert_error_line

    t0 = time.perf_counter()
    res = _cli("transcript", "--q", "2", "--s", "2", "--cluster", "tcp://127.0.0.1:9")
    assert_error_line(res, "cannot reach", only_line=False)
    assert time.perf_counter() - t0 < 20
    assert_error_line(_cli("transcript", "--cluster", "local:x"), "--cluster")


def test_cli_exhaustive_limit_rises_only_with_a_cluster(monkeypatch):
    from cliutil import assert_error_line

    monkeypatch.setattr(config, "CLUSTER_TRANSCRIPT_EXHAUSTIVE_MAX", 1 << 26)
    # 2^25 inputs: above the single-process limit, not refused with a cluster
    assert_error_line(
        _cli("transcript", "--q", "25", "--s", "1", "--exhaustive"), "above the limit 2^24"
    )
    assert_error_line(
        _cli("transcript", "--q", "27", "--s", "1", "--exhaustive", "--cluster", "local:1"),
        "above the cluster limit 2^26",
        only_line=False,
    )


def test_errors_on_workers_are_one_line(client, small_shards, tmp_path):
    from plugin_files import write_plugin

    path = write_plugin(tmp_path, emit_body="out[0] = 99")  # outside the alphabet 0..s
    spec = f"{path}:t"
    r = resolve(spec)
    fam = HardFamily(3, 3)
    with pytest.raises(SketchsimError, match="outside its declared alphabet"):
        measure_on_cluster(client, fam, "hard", spec, r, "exhaustive", 64, workers=2)


@pytest.mark.slow  # a fresh local cluster in a child process
def test_cli_plugin_error_on_workers_is_one_line(tmp_path):
    """No worker log or traceback on the terminal: the worker returns the error, no retries."""
    import subprocess

    from plugin_files import write_plugin

    path = write_plugin(tmp_path, emit_body="out[0] = 99")
    cmd = [sys.executable, "-m", "sketchsim", "transcript", "--q", "3", "--s", "3"]
    cmd += ["--protocol", f"{path}:t", "--cluster", "local:1", "--quiet"]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert res.returncode == 2, res.stderr
    err = res.stderr + res.stdout
    assert "Traceback" not in err and "Compute Failed" not in err, err
    last = [ln for ln in res.stderr.splitlines() if ln.strip()][-1]
    assert last.startswith("error:") and "outside its declared alphabet" in last


def test_a_worker_with_another_family_version_refuses(tmp_path):
    """The worker rebuilds the family from its spec and compares its tokens' digest
    with the client's: another version of a family plug-in is an error, not a
    measurement of other inputs under the client's name."""
    from sketchsim.cluster.sharded_measure import TranscriptJob, family_digest, prepare_job
    from sketchsim.errors import FamilyError

    fam = HardFamily(3, 2, seed=1)
    other = HardFamily(3, 2, seed=2)
    assert family_digest(fam) == family_digest(HardFamily(3, 2, seed=1))
    assert family_digest(fam) != family_digest(other)
    r = resolve("block-counts")
    job = TranscriptJob("hard", 3, 2, 1, "block-counts", r.identity, family_digest(other),
                        "exhaustive", 27)  # fmt: skip
    with pytest.raises(FamilyError, match="builds other tokens than the client's"):
        prepare_job(job)
    good = TranscriptJob("hard", 3, 2, 1, "block-counts", r.identity, family_digest(fam),
                         "exhaustive", 27)  # fmt: skip
    assert prepare_job(good)[0].q == 3


def test_workers_use_the_shipped_plugin_source_not_the_clients_path(tmp_path):
    """A file plug-in travels with the job: the worker's copy resolves after the client's
    file is gone, under the worker's own temporary folder, with the client's identity."""
    import shutil

    from sketchsim.cluster.sharded_measure import shipped_source, worker_spec
    from sketchsim.sketch.plugins import resolve

    client_dir = tmp_path / "client"
    client_dir.mkdir()
    mine = client_dir / "mine.py"
    shutil.copy(Path(__file__).parents[1] / "protocol_examples.py", mine)
    spec = f"{mine}:py-counts:unused=3"
    identity = resolve(spec).identity
    source = shipped_source(spec)
    assert source[0] == "mine.py" and source[1] == mine.read_bytes()
    shutil.rmtree(client_dir)  # the worker's machine does not have the client's files
    local = worker_spec(spec, source)
    assert str(client_dir) not in local and local.endswith("mine.py:py-counts:unused=3")
    assert resolve(local).identity == identity
    assert worker_spec("kernel:bits=3", None) == "kernel:bits=3"
