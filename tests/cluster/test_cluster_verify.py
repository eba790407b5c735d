"""Dask cluster path: same results as one process, resumable, robust to worker death."""

import json
import os
import sys
import time

import cloudpickle
import pytest

from sketchsim import config
from sketchsim.cluster.client import connect, parse_cluster, run_shards
from sketchsim.errors import SketchsimError

pytest.importorskip("distributed")  # the cluster extra is part of dev: CI runs these

cloudpickle.register_pickle_by_value(sys.modules[__name__])


@pytest.fixture(scope="module")
def client():
    with connect(parse_cluster("local:2")) as c:
        yield c


@pytest.mark.parametrize(
    "text",
    ["local:0", "local:x", "local:", "tcp://host", "tcp://:80", "tcp://h:0", "ssh://h:1", ""],
)
def test_bad_cluster_values(text):
    """The library names the parameter; the CLI shows it as --cluster (tests/cli)."""
    with pytest.raises(SketchsimError, match="^cluster ") as info:
        parse_cluster(text)
    assert info.value.param == "cluster"


def test_unreachable_scheduler_fails_fast():
    t0 = time.perf_counter()
    with pytest.raises(SketchsimError, match="cannot reach the Dask scheduler"):
        with connect(parse_cluster("tcp://127.0.0.1:9")):
            pass
    assert time.perf_counter() - t0 < 20


def _square(x):
    return x * x


def test_run_shards_orders_results_and_resumes(client, tmp_path):
    key = {"what": "squares"}
    shards = [(i,) for i in range(7)]
    assert run_shards(client, _square, shards, state_dir=tmp_path, key=key) == [
        i * i for i in range(7)
    ]
    assert len(list(tmp_path.glob("shard-*.json"))) == 7
    # resuming recomputes only the missing shard; finished ones are read back untouched
    kept = {p.name: p.stat().st_mtime_ns for p in tmp_path.glob("shard-*.json")}
    (tmp_path / "shard-000003.json").unlink()
    got = run_shards(client, _square, shards, state_dir=tmp_path, key=key)
    assert got == [i * i for i in range(7)]
    for name, t in kept.items():
        if name != "shard-000003.json":
            assert (tmp_path / name).stat().st_mtime_ns == t
    assert (tmp_path / "shard-000003.json").exists()
    with pytest.raises(SketchsimError, match="belongs to another run"):
        run_shards(client, _square, shards, state_dir=tmp_path, key={"what": "cubes"})


def _dies_once(marker, x):
    if not os.path.exists(marker):
        with open(marker, "w") as fh:
            fh.write("died")
        os._exit(1)  # the worker process dies mid-task
    return x + 1


def test_worker_death_does_not_change_results(client, tmp_path):
    marker = str(tmp_path / "marker")
    shards = [(marker, i) for i in range(4)]
    got = run_shards(client, _dies_once, shards, state_dir=None, key={"k": 1}, retries=3)
    assert got == [1, 2, 3, 4]
    assert os.path.exists(marker)


@pytest.mark.parametrize("construction, causal", [("rank1", False), ("softmax", True)])
def test_verify_on_cluster_equals_single_process(
    client, tmp_path, monkeypatch, construction, causal
):
    from sketchsim.cluster.sharded_verify import verify_on_cluster
    from sketchsim.heads.exhaustive import verify

    monkeypatch.setattr(config, "CLUSTER_SHARD_INPUTS", 1 << 9)
    # N = 7: too many count vectors, so both paths enumerate all 2^14 inputs
    one = verify(2, 7, construction, 0.9, causal).to_dict()
    many = verify_on_cluster(client, 2, 7, construction, 0.9, causal, tmp_path / "state")
    many = many.to_dict()
    one.pop("seconds"), many.pop("seconds")
    assert json.dumps(one, sort_keys=True) == json.dumps(many, sort_keys=True)
    assert len(list((tmp_path / "state").glob("shard-*.json"))) == 16  # 2^14 / 2^10


def test_killed_verify_resumes_with_the_same_result(client, tmp_path, monkeypatch):
    from sketchsim.cluster.sharded_verify import verify_on_cluster
    from sketchsim.heads.exhaustive import verify

    monkeypatch.setattr(config, "CLUSTER_SHARD_INPUTS", 1 << 8)
    state = tmp_path / "state"

    def stop_after_five(done, total):
        if done >= 5:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        verify_on_cluster(client, 2, 7, "rank1", 2.0, False, state, progress=stop_after_five)
    kept = {p.name: p.stat().st_mtime_ns for p in state.glob("shard-*.json")}
    assert 5 <= len(kept) < 16
    res = verify_on_cluster(client, 2, 7, "rank1", 2.0, False, state).to_dict()
    assert all((state / name).stat().st_mtime_ns == t for name, t in kept.items())
    ref = verify(2, 7, "rank1", 2.0, False).to_dict()
    res.pop("seconds"), ref.pop("seconds")
    assert res == ref


def _cli(*args):
    from click.testing import CliRunner

    from sketchsim.cli import main

    return CliRunner().invoke(main, list(args))


def test_verify_cli_same_json_with_and_without_cluster(tmp_path):
    one, many = tmp_path / "one.json", tmp_path / "many.json"
    size = ("--m", "1", "--n", "9")  # enumerated (count vectors do not pay at N = 9)
    assert _cli("verify", *size, "--json", str(one), "--quiet").exit_code == 0
    res = _cli("verify", *size, "--json", str(many), "--quiet", "--cluster", "local:2")
    assert res.exit_code == 0, res.output
    a, b = json.loads(one.read_text()), json.loads(many.read_text())
    for d in (a, b):
        for k in ("seconds", "argv", "parameters"):
            d.pop(k)
    assert a == b
    assert (tmp_path / "many.json.state" / "manifest.json").exists()


def test_count_vectors_run_in_this_process_without_starting_the_cluster(tmp_path, monkeypatch):
    """m*N = 39: 2^39 inputs, far beyond any enumeration, are 77,520 count vectors."""
    import sketchsim.cluster.client as client_mod

    def no_cluster(*a, **k):
        raise AssertionError("the cluster was started")

    monkeypatch.setattr(client_mod, "connect", no_cluster)
    out = tmp_path / "v.json"
    res = _cli("verify", "--m", "13", "--n", "3", "--construction", "softmax", "--json", str(out),
               "--cluster", "tcp://127.0.0.1:9")  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "cluster is not started" in res.output
    got = json.loads(out.read_text())
    assert got["inputs"] == 1 << 39 and got["complete"] and got["exact_fraction"] == 1.0


def test_shards_do_not_depend_on_the_cluster_size():
    from sketchsim.cluster.sharded_verify import shard_inputs

    low = config.CLUSTER_SHARD_INPUTS
    assert shard_inputs(1000) == 1000
    assert shard_inputs(1 << 26) == low
    assert shard_inputs(1 << 30) == 1 << 26  # 16 tasks
    assert shard_inputs(1 << 40) == 16 * low
    for bits in range(1, 41):
        span = shard_inputs(1 << bits)
        assert span & (span - 1) == 0 and (1 << bits) // span <= max(16, (1 << bits) // (16 * low))


def test_cluster_without_the_extra_says_how_to_install(monkeypatch):
    from cliutil import assert_error_line

    monkeypatch.setitem(sys.modules, "distributed", None)
    assert_error_line(
        _cli("verify", "--m", "1", "--n", "9", "--cluster", "local:1"), "sketchsim[cluster]"
    )


def test_cluster_bad_address_is_one_line():
    from cliutil import assert_error_line

    t0 = time.perf_counter()
    assert_error_line(
        _cli("verify", "--m", "1", "--n", "9", "--cluster", "tcp://127.0.0.1:9"),
        "cannot reach",
        only_line=False,
    )
    assert time.perf_counter() - t0 < 20


@pytest.mark.parametrize("text", ["x", "0", "-1", "nan", "1e9"])
def test_connect_timeout_env_is_checked(monkeypatch, text):
    from sketchsim.cluster.client import connect_timeout

    monkeypatch.setenv("SKETCHSIM_CONNECT_TIMEOUT", text)
    with pytest.raises(SketchsimError, match="SKETCHSIM_CONNECT_TIMEOUT"):
        connect_timeout()


def test_connect_timeout_env_sets_the_wait(monkeypatch):
    from sketchsim.cluster.client import CONNECT_TIMEOUT_S, connect_timeout

    monkeypatch.setenv("SKETCHSIM_CONNECT_TIMEOUT", "2.5")
    assert connect_timeout() == 2.5
    monkeypatch.delenv("SKETCHSIM_CONNECT_TIMEOUT")
    assert connect_timeout() == CONNECT_TIMEOUT_S


def test_the_estimate_uses_a_rate_timed_on_this_machine():
    from sketchsim.cluster.sharded_verify import estimate_verify_seconds, measure_rate

    rate = measure_rate("softmax", 2, 14, 2.0, False, inputs=1 << 16)
    assert 1e4 < rate < 1e11
    assert estimate_verify_seconds(2, 14, 4, rate) == pytest.approx((1 << 28) / (4 * rate))
    # without a measured rate: the nominal one, scaled by N^2 from N = 3
    assert estimate_verify_seconds(3, 3, 1) == pytest.approx(512 / config.VERIFY_RATE_PER_CORE)
