"""``cluster=`` on the library runs (#29): the same results as without, for every run."""

import json

import pytest

from sketchsim import api
from sketchsim.runs.frontier import FrontierPlan

pytest.importorskip("distributed")  # the cluster extra is part of dev: CI runs these


@pytest.fixture(scope="module")
def client():
    from sketchsim.cluster.client import connect, parse_cluster

    with connect(parse_cluster("local:2")) as c:
        yield c


def _without(entry: dict, *keys) -> str:
    return json.dumps({k: v for k, v in entry.items() if k not in keys}, sort_keys=True)


@pytest.mark.slow  # numba compiles the protocols in both workers
def test_transcript_on_a_cluster_equals_this_process(client):
    here = api.transcript(q=3, s=2, protocols=["block-counts", "clipped-counts"])
    there = api.transcript(q=3, s=2, protocols=["block-counts", "clipped-counts"], cluster=client)
    assert there.extra["cluster"]["worker_threads"] >= 1
    for a, b in zip(here.entries, there.entries, strict=True):
        assert _without(a, "seconds") == _without(b, "seconds", "cluster")


@pytest.mark.slow
def test_frontier_cells_on_a_cluster_equal_this_process(client, tmp_path):
    plan = FrontierPlan(("kernel",), "bits=1..6", (2, 3), (3,))
    here = api.run(plan)
    there = api.run(plan, cluster=client, resume=tmp_path / "f.json")
    assert [_without(c, "seconds") for c in here.cells] == [
        _without(c, "seconds") for c in there.cells
    ]
    assert api.run(plan, cluster=client, resume=tmp_path / "f.json").resumed == 2
    cell = api.frontier("kernel", "bits=1..6", 2, 3, cluster=client)
    assert cell.value == here.cells[0]["value"]


def test_verify_on_a_cluster_equals_this_process(client, tmp_path, monkeypatch):
    from sketchsim import config
    from sketchsim.heads.exhaustive import uses_count_vectors

    monkeypatch.setattr(config, "CLUSTER_SHARD_INPUTS", 1 << 9)
    m, n = 2, 7  # 2^14 inputs, too many count vectors: enumerated, in 16 shards
    assert not uses_count_vectors(m, n)
    here = api.verify(m, n, "rank1")
    there = api.verify(m, n, "rank1", cluster=client, state=tmp_path / "state")
    assert len(list((tmp_path / "state").glob("shard-*.json"))) == 16
    a, b = here.to_dict(), there.to_dict()
    a.pop("seconds"), b.pop("seconds")
    assert a == b


def test_bound_rows_on_a_cluster_equal_this_process(client):
    here = api.bound(4, 6)
    there = api.bound(4, 6, cluster=client)
    assert here.to_dict() == there.to_dict()
    assert [r["m"] for r in there.to_dict()["rows"]] == [4, 5, 6]


@pytest.mark.slow  # the trained engine compiles in the client and in both workers
def test_a_trained_model_on_a_cluster_equals_this_process(client, tmp_path):
    """#30: the ``trained`` protocol runs sharded (its weights file shipped by path)."""
    import importlib.util
    from pathlib import Path

    from sketchsim.sketch.family import HardFamily

    spec = importlib.util.spec_from_file_location(
        "trained_weights", Path(__file__).parents[1] / "sketch" / "test_trained_protocol.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    path = tmp_path / "w.npz"
    module.random_weights(path, HardFamily(3, 2, seed=0), 1, 2, 2, 3, "elu1")
    protocols = [f"trained:weights={path},bits=6"]
    here = api.transcript(q=3, s=2, protocols=protocols)
    there = api.transcript(q=3, s=2, protocols=protocols, cluster=client)
    a, b = here.entries[0], there.entries[0]
    assert _without(a, "seconds") == _without(b, "seconds", "cluster")
    assert a["inputs"] == 27 and a["declared_bits"] > 0
