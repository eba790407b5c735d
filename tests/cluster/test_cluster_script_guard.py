"""A script that starts ``local:N`` without a main guard is told why it fails (#47).

Dask's worker processes are spawned: each runs the calling script again while
it starts, so an unguarded script asks for a cluster in every worker and Dask
only says "Nanny failed to start".
"""

import multiprocessing
import subprocess
import sys
import types

import pytest

pytest.importorskip("distributed")

import distributed  # noqa: E402

from sketchsim.cluster.client import connect, parse_cluster  # noqa: E402
from sketchsim.errors import SketchsimError  # noqa: E402

GUARD = 'call sketchsim under `if __name__ == "__main__":`'


def _no_cluster(*args, **kwargs):
    raise AssertionError("a LocalCluster was started")


def test_a_nanny_that_fails_to_start_is_one_line_saying_why(monkeypatch):
    def nanny_fails(*args, **kwargs):
        raise RuntimeError("Nanny failed to start.")

    monkeypatch.setattr(distributed, "LocalCluster", nanny_fails)
    with pytest.raises(SketchsimError) as info:
        with connect(parse_cluster("local:2")):
            pass  # pragma: no cover
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("could not start local:2 (Nanny failed to start.): Dask starts")
    assert message.endswith(GUARD)


def test_another_runtime_error_is_not_explained_as_a_missing_guard(monkeypatch):
    def other(*args, **kwargs):
        raise RuntimeError("something else")

    monkeypatch.setattr(distributed, "LocalCluster", other)
    with pytest.raises(RuntimeError, match="something else"):
        with connect(parse_cluster("local:2")):
            pass  # pragma: no cover


def test_a_spawned_worker_running_the_script_is_refused_before_starting_one(monkeypatch):
    monkeypatch.setattr(distributed, "LocalCluster", _no_cluster)
    monkeypatch.setattr(multiprocessing.current_process(), "_inheriting", True, raising=False)
    script = types.ModuleType("__mp_main__")
    script.__file__ = "/somewhere/script.py"
    monkeypatch.setitem(sys.modules, "__mp_main__", script)
    with pytest.raises(SketchsimError) as info:
        with connect(parse_cluster("local:2")):
            pass  # pragma: no cover
    message = str(info.value)
    assert "\n" not in message and message.endswith(GUARD)
    assert message.startswith("cannot start local:2 in a worker process that is importing")


def test_an_unguarded_script_ends_with_the_explanation(tmp_path):
    script = tmp_path / "unguarded.py"
    script.write_text('import sketchsim\n\nsketchsim.bound(4, cluster="local:2")\n')
    out = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path, timeout=300
    )
    assert out.returncode == 1, out.stderr
    lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
    assert lines[-1].startswith("sketchsim.errors.SketchsimError: could not start local:2")
    assert lines[-1].endswith(GUARD)
    # the workers stopped at the same check instead of starting clusters of their own
    assert "in a worker process that is importing the script" in out.stderr
    assert "bootstrapping phase" not in out.stderr
