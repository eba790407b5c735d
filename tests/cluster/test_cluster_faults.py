"""The cluster under faults: no workers, workers gone, task errors, lost scheduler, bad workers."""

import time

import pytest
from click.testing import CliRunner
from cliutil import assert_error_line

pytest.importorskip("distributed")

from distributed import LocalCluster  # noqa: E402

from sketchsim.cli import main  # noqa: E402
from sketchsim.cluster.client import ClusterSpec, _check_workers, connect  # noqa: E402
from sketchsim.errors import SketchsimError  # noqa: E402
from sketchsim.futures import completed, dask_failure  # noqa: E402


@pytest.fixture(scope="module")
def empty():
    """A scheduler no worker ever joins (in this process: cheap to start)."""
    with LocalCluster(
        n_workers=0, processes=False, protocol="tcp", dashboard_address=":0"
    ) as cluster:
        yield cluster.scheduler_address


def test_no_worker_joins_within_the_timeout(empty):
    t0 = time.monotonic()
    with pytest.raises(SketchsimError, match="no Dask worker joined .* within 1 s") as info:
        with connect(ClusterSpec("remote", address=empty, timeout=1.0)):
            pass  # pragma: no cover
    assert info.value.param == "cluster_timeout" and time.monotonic() - t0 < 15


def test_the_cli_says_it_in_one_line_and_names_the_flag(empty):
    res = CliRunner().invoke(
        main, ["verify", "--m", "1", "--n", "9", "--cluster", empty, "--cluster-timeout", "1"]
    )
    assert_error_line(res, "no Dask worker joined")
    assert "--cluster-timeout" in res.output
    res = CliRunner().invoke(main, ["verify", "--m", "3", "--cluster-timeout", "-1"])
    assert_error_line(res, "--cluster-timeout")


def test_waiting_on_tasks_with_no_worker_stops_instead_of_hanging(empty):
    from distributed import Client

    with Client(empty, timeout="5s") as client:
        futures = [client.submit(sum, [1, 2], pure=False)]
        t0 = time.monotonic()
        with pytest.raises(SketchsimError, match="every Dask worker left"):
            list(completed(client, futures, timeout=1.0))
        assert time.monotonic() - t0 < 15
        client.cancel(futures)


def _boom(kind):
    if kind == "ours":
        raise SketchsimError("a plug-in said no")
    raise ValueError("broken task")


def test_a_task_error_is_one_line_and_ours_pass_through():
    with LocalCluster(n_workers=1, processes=False, dashboard_address=":0") as cluster:
        from distributed import Client

        with Client(cluster) as client:
            with pytest.raises(SketchsimError, match="a task failed on a worker: ValueError"):
                list(completed(client, [client.submit(_boom, "theirs", pure=False)]))
            with pytest.raises(SketchsimError, match="^a plug-in said no$"):
                list(completed(client, [client.submit(_boom, "ours", pure=False)]))


def test_dask_failures_are_worded_with_what_to_do():
    from concurrent.futures import CancelledError

    from distributed import KilledWorker
    from distributed.comm import CommClosedError

    lost = dask_failure(CommClosedError("in <TCP>"), ClusterSpec("remote", address="tcp://h:1"))
    assert "lost the Dask scheduler at tcp://h:1" in str(lost) and "run the same" in str(lost)
    assert "lost the Dask scheduler" in str(dask_failure(CancelledError()))
    assert "allowed-failures" in str(dask_failure(KilledWorker("k", "w", 3)))
    assert dask_failure(ValueError("ours")) is None  # not Dask's: left alone


class _FakeClient:
    def __init__(self, envs):
        self.envs = envs

    def run(self, fn):
        return self.envs


def test_worker_environments_are_checked():
    import sketchsim

    same = {"sketchsim": sketchsim.__version__, "torch": True}
    _check_workers(_FakeClient({"tcp://a:1": same}), need_torch=True)
    with pytest.raises(SketchsimError, match="worker tcp://b:1 runs sketchsim 0.0.1"):
        _check_workers(_FakeClient({"tcp://b:1": {**same, "sketchsim": "0.0.1"}}), False)
    with pytest.raises(SketchsimError, match="worker tcp://c:1 cannot import torch"):
        _check_workers(_FakeClient({"tcp://c:1": {**same, "torch": False}}), need_torch=True)
    _check_workers(_FakeClient({"tcp://c:1": {**same, "torch": False}}), need_torch=False)


def test_plain_progress_lines_estimate_from_measured_throughput(capsys):
    from sketchsim.cli import render

    now = [0.0]
    bar = render.PlainProgress("verify (shards)", every=10.0, clock=lambda: now[0])
    bar(0, 40)  # nothing finished: no rate yet
    now[0] = 5.0
    bar(4, 40)  # the first progress: the clock starts here, within 10 s of the last line
    now[0] = 20.0
    bar(10, 40)  # 6 shards in 15 s: 30 left take 75 s
    now[0] = 21.0
    bar(40, 40)
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        "verify (shards): 0/40 (0%), estimating",
        "verify (shards): 10/40 (25%), about 75 s left",
        "verify (shards): 40/40 (100%), done",
    ]


def test_a_scheduler_lost_mid_run_is_one_line_naming_what_to_do():
    """The cluster is closed while a task runs: the client stops with one line, no traceback.

    Closing an in-process cluster removes its worker before the client notices
    the scheduler is gone, so either line may come first; both say what to do.
    """
    import threading

    cluster = LocalCluster(n_workers=1, processes=False, protocol="tcp", dashboard_address=":0")
    spec = ClusterSpec("remote", address=cluster.scheduler_address, timeout=5.0)
    t0 = time.monotonic()
    with pytest.raises(
        SketchsimError, match="(lost the Dask scheduler|every Dask worker left)"
    ) as info:
        with connect(spec) as client:
            futures = [client.submit(time.sleep, 30, pure=False)]
            threading.Timer(1.0, cluster.close).start()
            list(completed(client, futures))
    assert "run the same command again" in str(info.value)
    assert time.monotonic() - t0 < 30


def test_a_client_without_its_scheduler_reports_the_scheduler_lost(monkeypatch):
    """While the client reconnects (status not "running") the wait ends with 'lost'."""
    import distributed

    def nothing_finishes(futures, timeout, return_when):
        time.sleep(timeout)
        raise TimeoutError

    class Reconnecting:
        status = "connecting"

        def scheduler_info(self):
            return {"workers": {}}

    monkeypatch.setattr(distributed, "wait", nothing_finishes)
    with pytest.raises(SketchsimError, match="^lost the Dask scheduler"):
        list(completed(Reconnecting(), [object()], timeout=0.05))
