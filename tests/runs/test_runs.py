"""Library runs (#29): one checkpoint helper, family identity in resume keys, the same results
with and without the CLI."""

import json

import pytest

from sketchsim import api
from sketchsim.checkpoint import Checkpoint, unit_key
from sketchsim.errors import SketchsimError
from sketchsim.runs.frontier import FrontierPlan
from sketchsim.runs.transcript import TranscriptPlan

FAMILY_FILE = """
from sketchsim.sketch.family import FamilyType, HardFamily

def build(q, s, seed, params):
    return HardFamily(q, s, seed + SHIFT)

SHIFT = {shift}
MINE = FamilyType("mine", "F(q,s) with a shifted seed", build)
"""


def _family_file(tmp_path, shift: int):
    path = tmp_path / "myfam.py"
    path.write_text(FAMILY_FILE.format(shift=shift))
    return f"{path}:MINE"


def _measured(run) -> list[str]:
    return [rep.spec for rep in run.reports]


def test_transcript_resume_keeps_what_was_measured(tmp_path):
    out = tmp_path / "t.json"
    plan = TranscriptPlan(3, 2, ("block-counts", "raw"))
    first = api.run(plan, resume=out)
    assert _measured(first) == ["block-counts", "raw"]
    again = api.run(plan, resume=out)
    assert _measured(again) == [] and again.resumed == ["block-counts", "raw"]
    assert again.entries == first.entries
    assert json.loads(out.read_text())["complete"] is True


def test_an_edited_family_file_is_measured_again(tmp_path):
    """The same family name and file path, other contents: resume must not reuse the old entries."""
    out = tmp_path / "t.json"
    spec = _family_file(tmp_path, 0)
    plan = TranscriptPlan(3, 2, ("block-counts",), family=spec)
    first = api.run(plan, resume=out)
    assert _measured(first) == ["block-counts"]
    assert _measured(api.run(plan, resume=out)) == []  # unchanged: resumed
    _family_file(tmp_path, 5)  # edited under the same name
    edited = api.run(plan, resume=out)
    assert _measured(edited) == ["block-counts"]
    assert edited.entries[0]["family_identity"] != first.entries[0]["family_identity"]


def test_an_edited_family_file_is_measured_again_by_the_frontier(tmp_path):
    out = tmp_path / "f.json"
    plan = FrontierPlan(("kernel",), "bits=1..6", (2,), (3,), family=_family_file(tmp_path, 0))
    first = api.run(plan, resume=out)
    assert first.resumed == 0 and len(first.cells) == 1
    assert api.run(plan, resume=out).resumed == 1
    _family_file(tmp_path, 7)
    edited = api.run(plan, resume=out)
    assert edited.resumed == 0
    assert edited.cells[0]["family_identity"] != first.cells[0]["family_identity"]


def test_the_family_identity_names_source_and_tokens(tmp_path):
    from sketchsim.sketch.family import HardFamily
    from sketchsim.sketch.family_plugins import family_identity

    a = family_identity("hard", HardFamily(3, 2, seed=0))
    assert a.startswith("sketchsim ") and "tokens:" in a
    assert family_identity("hard", HardFamily(3, 2, seed=1)) != a  # other tokens
    assert family_identity("hard", HardFamily(3, 2, seed=0)) == a
    spec = _family_file(tmp_path, 0)
    assert family_identity(spec, HardFamily(3, 2, seed=0)).startswith("sha256:")


def test_the_transcript_run_equals_the_cli_file(tmp_path):
    from click.testing import CliRunner

    from sketchsim.cli import main

    out = tmp_path / "cli.json"
    res = CliRunner().invoke(
        main, ["transcript", "--q", "3", "--s", "2", "--protocol", "raw", "--json", str(out)]
    )
    assert res.exit_code == 0, res.output
    run = api.transcript(q=3, s=2, protocols=["raw"])
    strip = ("seconds",)
    cli_entry = json.loads(out.read_text())["protocols"][0]
    lib_entry = run.entries[0]
    assert {k: v for k, v in cli_entry.items() if k not in strip} == json.loads(
        json.dumps({k: v for k, v in lib_entry.items() if k not in strip})
    )


def test_checkpoint_refuses_other_settings_and_bad_units(tmp_path):
    path = tmp_path / "c.json"

    def make(resume, match=None):
        return Checkpoint(
            path,
            "demo",
            {"a": 1},
            "rows",
            key=lambda u, _file: unit_key(u["k"]),
            problem=lambda u: None if isinstance(u, dict) and "k" in u else "has no 'k'",
            match=match or {"parameters": {"a": 1}},
            label="row",
            resume=resume,
        )

    assert make(True).done == {}  # no file yet: nothing resumed
    make(False).save([{"k": 1}, {"k": 2}], complete=False)
    assert set(make(True).done) == {unit_key(1), unit_key(2)}
    with pytest.raises(SketchsimError, match="other settings"):
        make(True, match={"parameters": {"a": 2}})
    make(False).save([{"j": 1}], complete=False)
    with pytest.raises(SketchsimError, match="row 1 has no 'k'.*older sketchsim"):
        make(True)
    path.write_text("[1, 2]")
    with pytest.raises(SketchsimError, match="not a demo result"):
        make(True)


def test_a_checkpoint_without_a_path_writes_nothing(tmp_path, monkeypatch):
    from sketchsim import results

    writes = []
    monkeypatch.setattr(results, "write_json_atomic", lambda *a, **k: writes.append(a))
    monkeypatch.chdir(tmp_path)  # a relative write would land here
    store = Checkpoint(None, "demo", {}, "rows", lambda u, f: str(u), lambda u: None, resume=True)
    store.save([{"k": 1}], complete=True)
    assert store.done == {} and writes == [] and not list(tmp_path.iterdir())
    Checkpoint(tmp_path / "r.json", "demo", {}, "rows", lambda u, f: str(u), lambda u: None).save(
        [{"k": 1}], complete=True
    )
    assert len(writes) == 1  # the same save with a path does write (the patch is seen)


def test_run_dispatches_every_plan_and_refuses_others(tmp_path):
    from sketchsim.runs.bound import BoundPlan

    bound = api.run(BoundPlan(3, 4))
    assert [r.m for r in bound.rows] == [3, 4] and "slope" in bound.growth
    with pytest.raises(TypeError, match="nothing to resume"):
        api.run(BoundPlan(3), resume=tmp_path / "b.json")
    with pytest.raises(TypeError, match="not a plan"):
        api.run({"q": 3})


def test_minrank_rows_resume_by_width(tmp_path):
    out = tmp_path / "mr.json"
    first = api.minrank((2,), train_max_m=0, resume=out)
    assert first.resumed == 0 and [r["m"] for r in first.rows] == [2]
    both = api.minrank((2, 3), train_max_m=0, resume=out)
    assert both.resumed == 1 and [r["m"] for r in both.rows] == [2, 3]
    assert both.rows[0] == first.rows[0]
    with pytest.raises(SketchsimError, match="other parameters"):
        api.minrank((2,), train_max_m=0, causal=True, resume=out)
