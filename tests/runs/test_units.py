"""The one unit runner (#46): resume after a kill at every unit boundary, a changed setting
refused and a changed code version measured again, and a cluster giving this process's results."""

import json

import pytest

from sketchsim import api, machine
from sketchsim.checkpoint import Checkpoint, unit_key
from sketchsim.errors import SketchsimError
from sketchsim.runs import frontier as frontier_run
from sketchsim.runs.frontier import FrontierPlan
from sketchsim.units import run_units

UNITS = [3, 1, 4, 1, 5]


def square(x: int, offset: int) -> dict:
    """A unit's measurement (module level: a Dask worker can run it)."""
    return {"x": x, "y": x * x + offset}


class Killed(BaseException):
    """A kill between two units (not an Exception: nothing may catch it)."""


def _store(path, offset: int = 0, resume: bool = True) -> Checkpoint:
    return Checkpoint(
        path,
        "squares",
        {"offset": offset},
        "units",
        lambda unit, _file: unit_key(unit["x"], unit["i"]),
        lambda unit: None if isinstance(unit.get("y"), int) else "has no y",
        match={"parameters": {"offset": offset}},
        resume=resume,
    )


def _run(path, offset=0, kill_after=None, calls=None, resume=True):
    store = _store(path, offset, resume)
    keys = [unit_key(x, i) for i, x in enumerate(UNITS)]
    slots = [store.get(k) for k in keys]

    def measure(i, x):
        if kill_after is not None and len(calls) == kill_after:
            raise Killed
        calls.append(i)
        return {"i": i, **square(x, offset)}

    def finished(i, unit):
        slots[i] = unit
        store.save([u for u in slots if u is not None], False)

    out = run_units(
        [(i, x) for i, x in enumerate(UNITS)], measure, resumed=slots, finished=finished
    )
    store.save(out, True)
    return out


@pytest.mark.parametrize("boundary", range(len(UNITS) + 1))
def test_a_run_killed_at_any_unit_boundary_resumes_there(tmp_path, boundary):
    path = tmp_path / "r.json"
    whole = _run(tmp_path / "whole.json", calls=[])
    calls: list = []
    if boundary < len(UNITS):
        with pytest.raises(Killed):
            _run(path, kill_after=boundary, calls=calls, resume=False)
        saved = json.loads(path.read_text()) if boundary else None
        assert (saved and [u["i"] for u in saved["units"]]) == (list(range(boundary)) or None)
        assert not saved or saved["complete"] is False
    else:
        _run(path, calls=calls, resume=False)
    rest: list = []
    again = _run(path, calls=rest)
    assert again == whole
    assert rest == list(range(boundary, len(UNITS)))  # only what the kill left unmeasured
    assert json.loads(path.read_text())["complete"] is True


def test_a_changed_setting_is_refused(tmp_path):
    path = tmp_path / "r.json"
    _run(path, calls=[])
    with pytest.raises(SketchsimError, match="it was made with other settings"):
        _run(path, offset=1, calls=[])


def test_a_changed_code_version_is_refused_and_the_file_kept(tmp_path, monkeypatch):
    path = tmp_path / "r.json"
    first = _run(path, calls=[])
    assert json.loads(path.read_text())["code"] == machine.package_digest()
    calls: list = []
    assert _run(path, calls=calls) == first and calls == []  # same code: all resumed
    before = path.read_bytes()
    monkeypatch.setattr(machine, "package_digest", lambda: "another sketchsim")
    with pytest.raises(SketchsimError, match="written by other sketchsim code"):
        _run(path, calls=calls)
    assert calls == [] and path.read_bytes() == before  # nothing measured, nothing overwritten


def test_progress_counts_resumed_units_and_every_measured_one():
    seen = []
    out = run_units(
        [(x, 0) for x in UNITS],
        square,
        resumed=[None, {"x": 1, "y": 1}, None, None, None],
        progress=lambda done, total: seen.append((done, total)),
    )
    assert [u["y"] for u in out] == [9, 1, 16, 1, 25]
    assert seen == [(1, 5), (2, 5), (3, 5), (4, 5), (5, 5)]


def test_arguments_are_built_only_for_the_units_measured():
    built = []

    def args(i, client):
        built.append((i, client))
        return UNITS[i], 0

    out = run_units(args, square, len(UNITS), resumed=[{"x": 3, "y": 9}, None, None, None, None])
    assert built == [(1, None), (2, None), (3, None), (4, None)]
    assert out[0] == {"x": 3, "y": 9} and out[4] == {"x": 5, "y": 25}


def test_frontier_killed_between_cells_resumes_at_the_boundary(tmp_path, monkeypatch):
    """The same through a command: the cells measured before the kill are not measured again."""
    plan = FrontierPlan(("kernel",), "bits=1..4", (2, 3), (1,))
    whole = api.run(plan)
    real, calls = frontier_run.measure_cell, []

    def dies_second(*args):
        if len(calls) == 1:
            raise Killed
        calls.append(args[1:4])
        return real(*args)

    path = tmp_path / "f.json"
    monkeypatch.setattr(frontier_run, "measure_cell", dies_second)
    with pytest.raises(Killed):
        api.run(plan, resume=path)
    assert len(json.loads(path.read_text())["cells"]) == 1
    monkeypatch.setattr(frontier_run, "measure_cell", real)
    again = api.run(plan, resume=path)
    assert again.resumed == 1
    strip = [{k: v for k, v in c.items() if k != "seconds"} for c in whole.cells]
    assert [{k: v for k, v in c.items() if k != "seconds"} for c in again.cells] == strip


def test_a_cluster_gives_this_process_results_and_maps_a_failure():
    pytest.importorskip("distributed")
    from sketchsim.cluster.client import connect, parse_cluster

    here = run_units([(x, 2) for x in UNITS], square)
    finished = []
    with connect(parse_cluster("local:2")) as client:
        there = run_units(
            [(x, 2) for x in UNITS],
            square,
            client=client,
            finished=lambda i, r: finished.append(i),
        )
        with pytest.raises(SketchsimError, match="unit 2 failed: TypeError"):
            run_units(
                [(x, 2) if k != 2 else ("x", 2) for k, x in enumerate(UNITS)],
                square,
                client=client,
                failed=lambda i, exc: SketchsimError(f"unit {i} failed: {type(exc).__name__}"),
            )
    assert there == here and sorted(finished) == list(range(len(UNITS)))
