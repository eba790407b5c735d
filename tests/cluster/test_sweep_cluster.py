"""Sweeps on a Dask cluster: same JSON as in-process, resumable, robust to worker death."""

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

torch = pytest.importorskip("torch", reason="the torch extra is not installed")
pytest.importorskip("distributed")  # the cluster extra is part of dev: CI runs these
torch.set_num_threads(1)

from cliutil import assert_error_line  # noqa: E402

from sketchsim.certify import load_family  # noqa: E402
from sketchsim.cli import main  # noqa: E402
from sketchsim.cluster.client import connect, parse_cluster  # noqa: E402
from sketchsim.errors import SketchsimError  # noqa: E402
from sketchsim.experiments.suites import Split, witness_split  # noqa: E402
from sketchsim.experiments.sweep import RunSpec, run_sweep, task_resources  # noqa: E402


@pytest.fixture(scope="module")
def client():
    """One local cluster of 2 worker processes for the module; the CLI reaches it by address."""
    with connect(parse_cluster("local:2")) as c:
        yield c


@pytest.fixture
def address(client):
    return client.scheduler.address


def _without_timings(data: dict) -> dict:
    """The results alone: run times and the writing process's machine facts may differ."""
    for run in data["runs"]:
        run.pop("seconds")
    data.pop("machine", None)
    return data


def _sweep_args(family, out, *extra):
    return ["sweep", "--family", str(family), "--json", str(out), *extra]


@pytest.mark.slow
def test_cli_sweep_gives_the_same_json_with_and_without_cluster(address, tiny_path, tmp_path):
    # kernel runs train on the family, softmax on random triples scored on the family:
    # both kinds of data travel to the workers
    grid = ["--ranks", "1,8", "--seeds", "1", "--steps", "60", "--triples", "60"]
    one, many = tmp_path / "one.json", tmp_path / "many.json"
    res = CliRunner().invoke(main, _sweep_args(tiny_path, one, *grid))
    assert res.exit_code == 0, res.output
    res = CliRunner().invoke(main, _sweep_args(tiny_path, many, *grid, "--cluster", address))
    assert res.exit_code == 0, res.output
    assert "workers" in res.output  # the cluster line; the link only with bokeh installed
    assert ("/status" in res.output) == (importlib.util.find_spec("bokeh") is not None)
    a, b = json.loads(one.read_text()), json.loads(many.read_text())
    assert b["complete"] and len(b["runs"]) == 3
    assert {r["trained_on"] for r in b["runs"]} == {"family", "random"}
    # bit-for-bit: the same float32 training on one torch thread, in another process
    assert _without_timings(a) == _without_timings(b)


def _witness_specs(seeds, steps, rank=1):
    # rank 1 is below the certified bound of the tiny family: every run takes all its steps
    return [RunSpec("witness", "", "kernel", "table", rank, s, steps=steps) for s in range(seeds)]


@pytest.mark.slow
def test_killed_client_resumes_without_redoing_finished_runs(address, tiny_path, tmp_path):
    out = tmp_path / "k.json"
    grid = ["--model", "kernel", "--ranks", "1", "--seeds", "6", "--steps", "150"]
    args = _sweep_args(tiny_path, out, *grid, "--cluster", address)
    proc = subprocess.Popen(
        [sys.executable, "-m", "sketchsim", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # the client process (and anything it starts) alone
    )
    try:
        deadline = time.monotonic() + 120
        runs = []
        while not runs and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.02)
            if out.exists():
                runs = json.loads(out.read_text())["runs"]
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    partial = json.loads(out.read_text())
    assert not partial["complete"] and 1 <= len(partial["runs"]) < 6
    res = CliRunner().invoke(main, [*args, "--resume"])
    assert res.exit_code == 0, res.output
    data = json.loads(out.read_text())
    assert data["complete"] and [r["spec"]["seed"] for r in data["runs"]] == list(range(6))
    assert all(r["steps"] == 150 for r in data["runs"])
    # the finished runs were read back, not trained again: their timings are unchanged
    before = {r["spec"]["seed"]: r["seconds"] for r in partial["runs"]}
    after = {r["spec"]["seed"]: r["seconds"] for r in data["runs"]}
    assert all(after[seed] == t for seed, t in before.items())


def test_runs_request_a_gpu_only_where_workers_offer_one(client, tiny_path, tmp_path):
    from distributed import Client, LocalCluster

    assert task_resources(client, "auto") is None and task_resources(client, "cuda") is None
    split = witness_split(load_family(tiny_path))
    specs = _witness_specs(2, 5)
    with LocalCluster(
        n_workers=1, threads_per_worker=1, processes=False, resources={"GPU": 1},
        dashboard_address=":0",
    ) as gpu_cluster, Client(gpu_cluster) as gpu_client:  # fmt: skip
        assert task_resources(gpu_client, "auto") == {"GPU": 1}
        assert task_resources(gpu_client, "cpu") is None
        # device auto resolves on the worker (CPU here), the run holds the worker's GPU slot
        rows = run_sweep(specs, lambda s: (split, None, None), None, {}, client=gpu_client)
    assert [r["steps"] for r in rows] == [5, 5]


def test_sweep_cluster_bad_address_is_one_line_and_fast(tiny_path, tmp_path):
    t0 = time.perf_counter()
    args = _sweep_args(tiny_path, tmp_path / "x.json", "--steps", "5", "--seeds", "1")
    res = CliRunner().invoke(main, [*args, "--cluster", "tcp://127.0.0.1:9"])
    assert_error_line(res, "cannot reach", only_line=False)
    assert time.perf_counter() - t0 < 20
    assert not (tmp_path / "x.json").exists()


@pytest.mark.parametrize("command", ["sweep", "reproduce"])
def test_cluster_without_the_extra_says_how_to_install(monkeypatch, tmp_path, command):
    monkeypatch.setitem(sys.modules, "distributed", None)
    args = ["--out", str(tmp_path / "r")] if command == "reproduce" else ["--seeds", "1"]
    t0 = time.perf_counter()
    res = CliRunner().invoke(main, [command, *args, "--cluster", "local:1"])
    assert time.perf_counter() - t0 < 20
    assert_error_line(res, "sketchsim[cluster]")


@pytest.mark.parametrize("command", ["sweep", "reproduce"])
def test_cluster_runs_use_one_torch_thread(command, tmp_path):
    args = ["--out", str(tmp_path / "r")] if command == "reproduce" else ["--seeds", "1"]
    res = CliRunner().invoke(main, [command, *args, "--threads", "2", "--cluster", "local:1"])
    assert_error_line(res, "one torch thread per worker")


@pytest.mark.slow
def test_reproduce_sweeps_on_a_cluster_match_in_process(client, tmp_path):
    from sketchsim.experiments.plan import default_plan
    from sketchsim.experiments.reproduce import Settings
    from sketchsim.runs.reproduce import reproduce

    tiny = Settings(
        witness=default_plan("witness").with_(steps=5, ranks=(1, 9), triples=50),
        ood=default_plan("ood").with_(
            steps=5, softmax_steps=5, ranks=(1,), scales="4:6:20", seeds=3, softmax_seeds=3
        ),
        samples=200,
        bound_to=8,
    )
    for name, c in (("one", None), ("many", client)):
        reproduce(tmp_path / name, True, log=lambda m: None, device="cpu", settings=tiny, client=c)
    for sweep in ("sweep_witness.json", "sweep_ood.json"):
        a = _without_timings(json.loads((tmp_path / "one" / sweep).read_text()))
        b = _without_timings(json.loads((tmp_path / "many" / sweep).read_text()))
        assert a == b and b["complete"]


def _killer(client, killed: list):
    """A progress callback that, once the runs are submitted, kills the first worker seen
    training one (SIGKILL of its process) and notes its pid in ``killed``."""

    def executing(dask_worker):  # runs on each worker (pickled by value: a nested function)
        return os.getpid(), len(dask_worker.state.executing)

    def kill_a_busy_worker(done, total):
        deadline = time.monotonic() + 60
        while not killed and time.monotonic() < deadline:
            for pid, busy in client.run(executing).values():
                if busy:
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
                    break
            time.sleep(0.01)

    return kill_a_busy_worker


@pytest.mark.slow
def test_worker_killed_mid_task_does_not_change_the_result(client, tiny_path, tmp_path):
    split = witness_split(load_family(tiny_path))
    specs = _witness_specs(3, 200)
    killed = []
    header = {"suite": "witness"}
    got = run_sweep(
        specs, lambda s: (split, None, None), tmp_path / "c.json", header, "cpu",
        progress=_killer(client, killed), client=client,
    )  # fmt: skip
    assert killed
    assert [r["steps"] for r in got] == [200] * 3
    run_sweep(specs, lambda s: (split, None, None), tmp_path / "r.json", header, "cpu")
    a = _without_timings(json.loads((tmp_path / "c.json").read_text()))
    b = _without_timings(json.loads((tmp_path / "r.json").read_text()))
    assert a == b


def test_a_run_that_keeps_losing_its_worker_is_one_error(client, tiny_path):
    split = witness_split(load_family(tiny_path))
    scheduler = client.cluster.scheduler
    allowed, scheduler.allowed_failures = scheduler.allowed_failures, 0  # first death is fatal
    killed = []
    try:
        with pytest.raises(SketchsimError, match="lost its worker more often"):
            # runs long enough that the kill lands mid-run, not as one finishes
            run_sweep(
                _witness_specs(2, 5000), lambda s: (split, None, None), None, {}, "cpu",
                progress=_killer(client, killed), client=client,
            )  # fmt: skip
    finally:
        scheduler.allowed_failures = allowed
    assert killed


def test_a_run_failing_on_the_cluster_is_one_error(client, tiny_path):
    """Any other failure of a run's task (here a split the head cannot read) is one
    SketchsimError naming the run, not the worker's traceback."""
    split = witness_split(load_family(tiny_path))
    bad = Split(split.tokens, split.targets[:2], split.scored)  # targets of 2 inputs
    with pytest.raises(SketchsimError, match=r"the run kernel r = \d+, seed 0 failed on the"):
        run_sweep(
            _witness_specs(1, 5), lambda s: (bad, None, None), None, {}, "cpu",
            client=client, retries=0,
        )  # fmt: skip


@pytest.mark.slow  # trains twice and starts torch and the engine in both workers
def test_capacity_sweep_on_a_cluster_equals_this_process(address, tmp_path):
    """The capacity suite's runs as Dask tasks (#45): the same rows and weights files."""
    grid = ["--suite", "capacity", "--q", "3", "--s", "1", "--seeds", "2", "--steps", "40",
            "--layers", "1", "--ranks", "1", "--value-widths", "2",
            "--model", "kernel"]  # fmt: skip
    out = {}
    for name, extra in (("one", []), ("many", ["--cluster", address])):
        json_path, weights = tmp_path / f"{name}.json", tmp_path / f"w-{name}"
        argv = ["sweep", *grid, "--json", str(json_path), "--save-weights", str(weights), *extra]
        res = CliRunner().invoke(main, argv)
        assert res.exit_code == 0, res.output
        out[name] = (_without_timings(json.loads(json_path.read_text())), weights)
    (a, wa), (b, wb) = out["one"], out["many"]
    assert b["complete"] and len(b["runs"]) == 2
    a.pop("argv"), b.pop("argv")
    a["parameters"].pop("cluster", None), b["parameters"].pop("cluster", None)
    assert a == b
    for run in a["runs"]:
        assert (wa / run["weights"]).read_bytes() != b"" and (wb / run["weights"]).exists()
