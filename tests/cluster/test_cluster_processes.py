"""A real ``dask scheduler`` and ``dask worker`` in their own processes, killed with SIGKILL.

The other cluster tests close clusters politely; here the scheduler process is
killed with ``kill -9`` while ``sketchsim verify --cluster tcp://...`` runs in
its own process: the command must end with one ``error:`` line and exit 2 (no
traceback), keep its finished shards, and the same command against a new
scheduler must resume from them and give the single process's result.
"""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

pytest.importorskip("distributed")

pytestmark = pytest.mark.slow  # starts and kills real scheduler and worker processes

M, N = 2, 13  # 2^26 inputs, enumerated in 4 shards of 2^24 (count vectors do not pay)


def _start(args: list[str], log) -> subprocess.Popen:
    env = {**os.environ, "NUMBA_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", *args], stdout=log, stderr=log, env=env, start_new_session=True
    )


def _cluster(tmp_path, tag: str):
    """``(address, [scheduler, worker])`` of a fresh scheduler with one one-thread worker.

    The scheduler picks its own free port (``--port 0``) and writes its address to a
    scheduler file: a port chosen here and bound later can be taken by another test's
    cluster in between ("Address already in use", seen under ``-n 2``).
    """
    log = open(tmp_path / f"{tag}.log", "w")  # noqa: SIM115 - closed with the processes
    file = tmp_path / f"{tag}-scheduler.json"
    sched = _start(["distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", "0",
                    "--scheduler-file", str(file), "--no-dashboard"], log)  # fmt: skip
    deadline = time.monotonic() + 60
    while True:
        try:
            address = json.loads(file.read_text())["address"]
            break
        except (OSError, ValueError, KeyError):
            assert sched.poll() is None, (tmp_path / f"{tag}.log").read_text()
            assert time.monotonic() < deadline, "the scheduler wrote no address within 60 s"
            time.sleep(0.05)
    worker = _start(["distributed.cli.dask_worker", address, "--nthreads", "1",
                     "--no-dashboard", "--no-nanny"], log)  # fmt: skip
    return address, [sched, worker]


def _stop(procs) -> None:
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
        p.wait(timeout=30)


def _verify(address: str, out, **popen):
    cmd = [sys.executable, "-m", "sketchsim", "verify", "--m", str(M), "--n", str(N),
           "--construction", "softmax", "--json", str(out), "--quiet", "--cluster", address,
           "--cluster-timeout", "60"]  # fmt: skip
    env = {**os.environ, "SKETCHSIM_CONNECT_TIMEOUT": "30", "COLUMNS": "200"}
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env, **popen)  # fmt: skip


def test_scheduler_killed_mid_verify_is_one_line_and_the_rerun_resumes(tmp_path):
    from sketchsim.heads.exhaustive import verify

    out = tmp_path / "v.json"
    state = tmp_path / "v.json.state"
    address, procs = _cluster(tmp_path, "first")
    try:
        run = _verify(address, out)
        deadline = time.monotonic() + 120
        while not list(state.glob("shard-*.json")):  # the first shard is finished
            assert run.poll() is None, run.communicate()[0]
            assert time.monotonic() < deadline, "no shard finished within 120 s"
            time.sleep(0.05)
        os.kill(procs[0].pid, signal.SIGKILL)  # kill -9 the scheduler
        output, _ = run.communicate(timeout=120)
    finally:
        _stop(procs)
    assert run.returncode == 2, output
    assert "Traceback" not in output, output
    last = [ln for ln in output.splitlines() if ln.strip()][-1]
    assert last.startswith("error: lost the Dask scheduler"), output
    assert "run the same command again" in last
    kept = {p.name: p.stat().st_mtime_ns for p in state.glob("shard-*.json")}
    assert 1 <= len(kept) < 4 and not out.exists()

    address, procs = _cluster(tmp_path, "second")
    try:
        output, _ = _verify(address, out).communicate(timeout=300)
    finally:
        _stop(procs)
    assert "Traceback" not in output and out.exists(), output
    assert all((state / name).stat().st_mtime_ns == t for name, t in kept.items())
    got = json.loads(out.read_text())
    ref = verify(M, N, "softmax", 2.0, False).to_dict()
    for key in ("max_abs_error", "exact_fraction", "counterexample", "inputs", "complete"):
        assert got[key] == ref[key], key
