"""``transcript`` as a library run (#46): the API and the CLI write the same result file, and
the run computes the verdicts and statistics the table shows (the CLI only formats them)."""

import json
import math

import pytest
from click.testing import CliRunner

from sketchsim import api
from sketchsim.cli import main
from sketchsim.runs.transcript import ProtocolVerdicts, TranscriptPlan, entropy_halfwidth

SPECS = ["kernel:bits=2", "clipped-counts:levels=2", "block-counts"]


def _result(path) -> dict:
    """A result file without the protocols' timings (the one field that differs: in one
    process the command lines are the same)."""
    data = json.loads(path.read_text())
    for entry in data["protocols"]:
        entry.pop("seconds")
    return data


@pytest.mark.parametrize(
    "kwargs, flags",
    [
        ({"q": 4, "s": 3}, ["--q", "4", "--s", "3"]),
        (
            {"q": 6, "s": 3, "exhaustive": False, "samples": 500, "seed": 2},
            ["--q", "6", "--s", "3", "--sampled", "--samples", "500", "--seed", "2"],
        ),
    ],
    ids=["exhaustive", "sampled"],
)
def test_the_api_and_the_cli_write_the_same_file(tmp_path, kwargs, flags):
    api_file, cli_file = tmp_path / "api.json", tmp_path / "cli.json"
    got = api.transcript(protocols=SPECS, json_path=api_file, **kwargs)
    protocol_flags = [f for spec in SPECS for f in ("--protocol", spec)]
    res = CliRunner().invoke(
        main, ["transcript", *flags, *protocol_flags, "--quiet", "--json", str(cli_file)]
    )
    assert res.exit_code == 0, res.output
    assert _result(api_file) == _result(cli_file)
    assert _result(cli_file)["protocols"] == [
        {k: v for k, v in entry.items() if k != "seconds"} for entry in got.entries
    ]
    assert json.loads(cli_file.read_text())["complete"] is True


def test_the_exhaustive_verdicts_live_on_the_run():
    run = api.transcript(q=4, s=3, protocols=SPECS)
    assert run.exact and run.bound_bits == 8.0 and run.inputs_run == 256
    assert math.isclose(run.collision_reach, 3 / (256 * 255 / 2))
    kernel, clipped, counts = run.verdicts()
    assert [v.name for v in (kernel, clipped, counts)] == SPECS
    # decodable but not decoded: the transcripts separate the answers, the readout is wrong
    assert kernel.decodable is True and not kernel.correct and kernel.decodable_not_decoded
    assert kernel.entropy_verdict == "over" and round(kernel.entropy_ratio, 2) == 1.31
    assert kernel.entropy_halfwidth is None and kernel.entropy_upper is None  # exact: no interval
    # refuted twice: a verified collision and the entropy argument
    assert clipped.decodable is False and clipped.entropy_verdict == "below"
    assert clipped.entry["collision"] is not None and not clipped.refuted_otherwise
    assert clipped.decodable_reason.startswith("refuted: verified collision")
    assert not clipped.correct and not clipped.correct_below_bound
    assert counts.correct and counts.decodable is True and counts.entropy_ratio == 1.0
    assert counts.entropy_verdict == "over" and not counts.decodable_not_decoded
    assert all(v.undersampled == 0 and v.jit for v in (kernel, clipped, counts))
    assert [len(v.layer_halfwidths) for v in (kernel, clipped, counts)] == [1, 1, 1]


def test_the_sampled_verdicts_live_on_the_run():
    run = api.run(TranscriptPlan(6, 3, SPECS[:2], samples=500, exhaustive=False))
    assert not run.exact and run.inputs_run == 500 and run.confidence == 0.95
    assert math.isclose(run.collision_reach, 3 / (500 * 499 / 2))
    kernel, clipped = run.verdicts()
    assert kernel.decodable is None and kernel.decodable_reason.startswith("not refuted")
    low, high = kernel.entry["entry_entropy_ci"]
    assert kernel.entropy_halfwidth == pytest.approx((high - low) / 2) and low < high
    assert kernel.entropy_upper == high
    assert kernel.layer_halfwidths == (entropy_halfwidth(kernel.entry["layers"][0]),)
    assert clipped.entropy_verdict == "below" and clipped.decodable is False
    assert clipped.entropy_upper == clipped.entry["entry_entropy_ci"][1] < run.bound_bits


def _entry(**over) -> dict:
    entry = {
        "spec": "", "name": "p", "engine": "jit", "correct_fraction": 1.0,
        "meets_bound": True, "collision": None, "wrong_inputs": 0, "decodable": None,
        "decodable_reason": "not refuted", "entry_entropy_bits": 6.0,
        "entry_entropy_ci": [5.0, 7.0], "entry_entropy_below_bound": False,
    }  # fmt: skip
    return entry | over


@pytest.mark.parametrize(
    "entry, bound, exact, expected",
    [
        # under the bound without the flag: an undersampled estimate, biased low, no verdict
        (_entry(), 8.0, False, {"entropy_verdict": "under", "entropy_ratio": 0.75}),
        (_entry(), 0.0, False, {"entropy_verdict": None, "entropy_ratio": None}),
        (_entry(entry_entropy_below_bound=True), 0.0, False, {"entropy_verdict": "below"}),
        ({k: v for k, v in _entry().items() if not k.startswith("entry_")}, 8.0, False,
         {"entropy_verdict": None, "entropy_halfwidth": None, "entropy_upper": None}),
        (_entry(entry_entropy_ci=[6.0, 6.0]), 4.0, True,
         {"entropy_verdict": "over", "entropy_ratio": 1.5, "entropy_halfwidth": None}),
        # refuted neither by a collision nor by the entropy argument: the reason is printed
        (_entry(decodable=False, decodable_reason="refuted: x"), 4.0, False,
         {"refuted_otherwise": True, "entropy_upper": 7.0, "entropy_halfwidth": 1.0}),
        (_entry(meets_bound=False), 8.0, True, {"correct_below_bound": True, "correct": True}),
        (_entry(undersampled_entries=3, engine="python"), 8.0, False,
         {"undersampled": 3, "jit": False}),
        (_entry(undersampled_entries=3), 8.0, True, {"undersampled": 0}),
        (_entry(decodable=True, wrong_inputs=2, correct_fraction=0.5, spec="p:k=1"), 4.0, True,
         {"decodable_not_decoded": True, "correct": False, "name": "p:k=1"}),
    ],
)  # fmt: skip
def test_each_verdict_is_computed_from_the_entry(entry, bound, exact, expected):
    got = ProtocolVerdicts.of(entry, bound, exact)
    assert {k: getattr(got, k) for k in expected} == expected
