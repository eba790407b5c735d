"""The API's ``cluster=`` and ``protocols=`` arguments as callers write them (#47)."""

import pytest

from sketchsim import api
from sketchsim.errors import SketchsimError
from sketchsim.runs.clusters import open_cluster
from sketchsim.runs.frontier import FrontierPlan
from sketchsim.runs.transcript import TranscriptPlan


@pytest.mark.parametrize("value", [123, ["local:2"], 2.5])
def test_a_cluster_of_a_wrong_type_is_one_line_naming_the_accepted_forms(value):
    for call in (
        lambda: api.bound(4, cluster=value),
        lambda: api.transcript(2, 1, protocols=["raw"], cluster=value),
    ):
        with pytest.raises(SketchsimError) as info:
            call()
        message = str(info.value)
        assert "\n" not in message and info.value.param == "cluster"
        assert message.startswith("cluster must be None, 'local:N', 'tcp://HOST:PORT', a ")
        assert "ClusterSpec or a distributed.Client, got " + type(value).__name__ in message


def test_a_client_is_recognised_by_its_methods():
    class LikeAClient:
        def submit(self, *args, **kwargs): ...

        def scheduler_info(self): ...

    client = LikeAClient()
    with open_cluster(client) as (used, spec):
        assert used is client and spec is None
    with pytest.raises(SketchsimError, match="got NoScheduler"):
        with open_cluster(type("NoScheduler", (), {"submit": LikeAClient.submit})()):
            pass  # pragma: no cover


def test_one_protocol_string_is_one_protocol_not_one_per_letter():
    assert TranscriptPlan(4, 3, "block-counts") == TranscriptPlan(4, 3, ("block-counts",))
    assert FrontierPlan("kernel", "bits=1..4") == FrontierPlan(("kernel",), "bits=1..4")
    one = api.transcript(4, 3, protocols="block-counts")
    listed = api.transcript(4, 3, protocols=["block-counts"])
    assert [r.spec for r in one.reports] == [r.spec for r in listed.reports] == ["block-counts"]
    keep = ("spec", "identity", "distinct_transcripts", "correct_fraction", "meets_bound")
    assert [{k: e[k] for k in keep} for e in one.entries] == [
        {k: e[k] for k in keep} for e in listed.entries
    ]
    assert one.header == listed.header


def test_verify_has_one_default_construction_for_the_api_and_the_cli():
    """Was: ``sketchsim verify`` checked softmax by default, ``sketchsim.verify(4, 3)`` rank1."""
    import inspect

    from sketchsim.cli import main
    from sketchsim.runs.verify import DEFAULT_CONSTRUCTION
    from sketchsim.runs.verify import run as run_verify

    option = next(p for p in main.get_command(None, "verify").params if p.name == "construction")
    assert option.default == DEFAULT_CONSTRUCTION
    assert inspect.signature(run_verify).parameters["construction"].default == DEFAULT_CONSTRUCTION
    assert api.verify(2, 2).construction == DEFAULT_CONSTRUCTION
