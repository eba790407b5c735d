"""The cold run's helper (sketchsim.sketch.prewarm): which loops it takes, the claims, results."""

import json
import os
import subprocess
import sys

import pytest
from plugin_files import write_plugin

from sketchsim.sketch import HardFamily
from sketchsim.sketch.engine import loop_functions
from sketchsim.sketch.engine_cache import loop_file
from sketchsim.sketch.inputs import resolve_protocols
from sketchsim.sketch.measure import DEFAULT_SPECS
from sketchsim.sketch.prewarm import Prewarm, claim, cold_loops


def test_cold_loops_group_the_main_jobs_protocols_by_engine_loop(tmp_path, monkeypatch):
    monkeypatch.setenv("SKETCHSIM_CACHE_DIR", str(tmp_path))
    fam = HardFamily(4, 1)
    plug = write_plugin(tmp_path)
    resolved = resolve_protocols([*DEFAULT_SPECS, f"{plug}:P", "kernel:r=5000000"])
    groups = cold_loops(fam, resolved)
    # raw; the two count protocols; the four kernel heads (one loop, shared); the
    # plug-in and a spec whose plan fails are left to the measuring process
    kernels = [s for s in DEFAULT_SPECS if s.startswith(("kernel", "multihead"))]
    assert groups == [["raw"], ["block-counts", "clipped-counts"], kernels]
    # a loop whose generated module exists is warm: no longer handed to a helper
    proto = dict(resolved)["block-counts"].protocol
    loop_file(*loop_functions(proto.plan(fam.context(), {}))).write_text("")
    assert cold_loops(fam, resolved) == [["raw"], kernels]


def test_a_loop_goes_to_the_first_claim(tmp_path):
    assert claim(tmp_path, 0) and not claim(tmp_path, 0)
    assert claim(tmp_path, 1)


class _Helper:
    """A stand-in for the helper process: running until ``exit_code`` is set, or
    until polled ``exit_after`` times (so that a wrong wait fails instead of hanging)."""

    def __init__(self, exit_after=None):
        self.exit_code, self.exit_after, self.polls = None, exit_after, 0

    def poll(self):
        self.polls += 1
        if self.exit_after is not None and self.polls > self.exit_after:
            self.exit_code = 0
        return self.exit_code

    def kill(self):
        self.exit_code = -9

    def wait(self):
        return self.exit_code


def test_wait_claims_free_loops_and_waits_only_for_the_helpers(tmp_path):
    helper = _Helper()
    warm = Prewarm(helper, tmp_path, {"raw": 0, "kernel": 1, "multihead": 1, "other": 2})
    warm.wait("raw")  # free: taken here, returns at once
    assert not claim(tmp_path, 0)
    warm.wait("not-cold")  # not handed over: returns at once
    claim(tmp_path, 1)  # the helper's, finished
    (tmp_path / "done_1").touch()
    warm.wait("kernel")
    warm.wait("multihead")
    claim(tmp_path, 2)  # the helper's, which has died before finishing it
    helper.exit_code = 1
    warm.wait("other")
    helper.exit_code = None
    # a loop this process claimed for one spec is its own for the next: no waiting
    # on a helper that runs on (a stand-in that never exits)
    running = _Helper(exit_after=3)
    mine = Prewarm(running, tmp_path, {"block-counts": 3, "clipped-counts": 3})
    mine.wait("block-counts")
    mine.wait("clipped-counts")
    assert mine.mine == {3} and running.polls == 0
    warm.close()  # kills a helper that still runs and drops the folder
    assert helper.exit_code == -9 and not tmp_path.exists() and warm.process is None


def test_no_helper_without_jit_a_numba_cache_or_a_second_cpu(monkeypatch):
    import numba

    from sketchsim.sketch import prewarm

    monkeypatch.setenv("SKETCHSIM_PREWARM", "1")
    monkeypatch.setattr(prewarm.os, "sched_getaffinity", lambda pid: {0, 1})
    assert prewarm._enabled()
    monkeypatch.setattr(prewarm.os, "sched_getaffinity", lambda pid: {0})
    assert not prewarm._enabled()
    monkeypatch.setattr(prewarm.os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(numba.config, "DISABLE_JIT", True)
    assert not prewarm._enabled()
    monkeypatch.setattr(numba.config, "DISABLE_JIT", False)
    from sketchsim import numba_cache

    monkeypatch.setattr(numba_cache, "configure", lambda: numba_cache.CacheChoice("off", None))
    assert not prewarm._enabled()
    monkeypatch.undo()
    monkeypatch.setenv("SKETCHSIM_PREWARM", "0")
    assert not prewarm._enabled()


@pytest.mark.parametrize("fails", ["mkdtemp", "Popen"])
def test_a_helper_that_cannot_start_leaves_the_run_to_this_process(fails, tmp_path, monkeypatch):
    from sketchsim.sketch import prewarm

    monkeypatch.setenv("SKETCHSIM_CACHE_DIR", str(tmp_path / "engines"))
    monkeypatch.setattr(prewarm, "_enabled", lambda: True)
    made = []

    def mkdtemp(prefix):
        if fails == "mkdtemp":
            raise OSError("read-only")
        made.append(tmp_path / "job")
        made[-1].mkdir()
        return str(made[-1])

    def popen(*args, **kwargs):
        raise OSError("no processes left")

    monkeypatch.setattr(prewarm.tempfile, "mkdtemp", mkdtemp)
    monkeypatch.setattr(prewarm.subprocess, "Popen", popen)
    fam = HardFamily(4, 1)
    resolved = resolve_protocols(["raw", "block-counts"])
    assert len(cold_loops(fam, resolved)) == 2
    helper = prewarm.start(("hard", 4, 1, 10, 0), fam, resolved, fam.sample_answers(3))
    assert helper.process is None
    helper.wait("raw")  # nothing to wait for
    helper.close()
    assert not any(p.exists() for p in made)  # a folder made before Popen failed is gone


def test_the_helpers_job_is_plain_json_with_the_answers_dtype(tmp_path, monkeypatch):
    import numpy as np

    from sketchsim.machine import package_digest
    from sketchsim.sketch import prewarm

    monkeypatch.setenv("SKETCHSIM_CACHE_DIR", str(tmp_path / "engines"))
    monkeypatch.setattr(prewarm, "_enabled", lambda: True)
    started = []

    def popen(cmd, **kwargs):
        started.append((cmd, kwargs["env"]))
        return _Helper()

    monkeypatch.setattr(prewarm.subprocess, "Popen", popen)
    fam = HardFamily(4, 1)
    T = fam.sample_answers(3)
    resolved = resolve_protocols(["raw", "block-counts"])
    args = ("hard", np.int64(4), np.int64(1), np.int64(10), np.int64(0))  # NumPy ints from a script
    helper = prewarm.start(args, fam, resolved, T)
    ((cmd, env),) = started
    assert cmd[1:4] == ["-P", "-m", "sketchsim.sketch.prewarm"]
    assert env["SKETCHSIM_PREWARM"] == "0"
    job = json.loads(open(cmd[-1]).read())
    assert job["family"] == ["hard", 4, 1, 10, 0] and job["specs"] == ["raw", "block-counts"]
    assert job["dtype"] == str(T.dtype) and job["answers"] == T[0].tolist()
    assert job["digest"] == package_digest() and job["parent"] == os.getpid()
    helper.close()
    assert not os.path.exists(job["folder"])


def test_a_helper_of_another_sketchsim_or_an_ended_run_compiles_nothing(tmp_path):
    """The helper stops before any claim when its package digest is not the run's, or
    when the run that started it has ended (its parent is not the job's)."""
    from sketchsim.machine import package_digest

    job = {"family": ["hard", 3, 2, 10, 0], "specs": ["raw", "block-counts"],
           "answers": [0, 1, 2], "dtype": "uint8", "folder": str(tmp_path)}  # fmt: skip
    for digest, parent in (("another", os.getpid()), (package_digest(), -1)):
        (tmp_path / "job.json").write_text(json.dumps({**job, "digest": digest, "parent": parent}))
        env = {**os.environ, "SKETCHSIM_PREWARM": "0", "SKETCHSIM_CACHE_DIR": str(tmp_path)}
        cmd = [sys.executable, "-P", "-m", "sketchsim.sketch.prewarm", str(tmp_path / "job.json")]
        subprocess.run(cmd, env=env, check=True, timeout=60)
        assert not list(tmp_path.glob("claim_*")) and not list(tmp_path.glob("done_*"))


_CHILD = """
import json, sys
from sketchsim.runs.transcript import TranscriptPlan, run
from sketchsim.sketch import engine
res = run(TranscriptPlan(q=3, s=2, protocols=("raw", "block-counts", "clipped-counts")))
loops = {fn.__module__: sum(fn.stats.cache_hits.values()) for fn in engine._LOOPS.values()}
entries = [{k: v for k, v in e.items() if k != "seconds"} for e in res.entries]
print(json.dumps({"entries": entries, "hits": sorted(loops.values())}))
"""


def _run_child(tmp_path, prewarm: str) -> dict:
    env = {
        **os.environ,
        "SKETCHSIM_CACHE_DIR": str(tmp_path / prewarm / "engines"),
        "NUMBA_CACHE_DIR": str(tmp_path / prewarm / "numba"),
        "SKETCHSIM_PREWARM": prewarm,
        "TMPDIR": str(tmp_path),
    }
    out = subprocess.run(
        [sys.executable, "-c", _CHILD], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_a_cold_run_loads_the_helpers_loop_and_measures_the_same(tmp_path):
    with_helper = _run_child(tmp_path, "1")
    alone = _run_child(tmp_path, "0")
    assert with_helper["entries"] == alone["entries"]
    # alone, both loops are compiled here; with the helper, the count protocols'
    # loop (the last needed) comes from the cache it filled
    assert alone["hits"] == [0, 0]
    assert with_helper["hits"] == [0, 1]
    assert not list(tmp_path.glob("sketchsim-prewarm-*"))  # the helper's folder is gone
