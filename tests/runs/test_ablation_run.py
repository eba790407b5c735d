"""``ablation`` as a library run (#46): the API and the CLI write the same file for the
ablation and both screens, and the run computes what the tables show."""

import json

import pytest
from click.testing import CliRunner

from sketchsim.errors import SketchsimError
from sketchsim.runs.ablation import (
    AblationPlan,
    ScreenMapsPlan,
    ScreenStopPlan,
    ScreenStopRun,
)

pytest.importorskip("torch", reason="the torch extra is not installed")


def _result(path) -> dict:
    """A result file without the timings of the screens' rows (the one field that differs:
    in one process the command lines are the same)."""
    data = json.loads(path.read_text())
    for row in data["rows"]:
        row.pop("seconds", None)
    return data


CASES = [
    (
        {"seeds": 1, "steps": 2, "triples": 8},
        ["--seeds", "1", "--steps", "2", "--triples", "8"],
    ),
    (
        {"screen_stop": (0.3, 0.5), "scales": "8:64:50", "steps": 2, "seeds": 1},
        ["--screen-stop", "0.3,0.5", "--scales", "8:64:50", "--steps", "2", "--seeds", "1"],
    ),
    (
        {"screen_stop": (0.3,), "scales": "8:64:50", "steps": 2, "seeds": 2, "kernel_rank": 0},
        ["--screen-stop", "0.3", "--scales", "8:64:50", "--steps", "2", "--seeds", "2"]
        + ["--ranks", "0"],
    ),
    (
        {"screen_maps": "8:64:50", "ranks": (2,), "steps": 2, "seeds": 1, "lr": 0.05},
        ["--screen-maps", "8:64:50", "--ranks", "2", "--steps", "2", "--seeds", "1"]
        + ["--lr", "0.05"],
    ),
]


@pytest.mark.parametrize(
    "kwargs, flags", CASES, ids=["ablation", "screen-stop", "softmax-alone", "screen-maps"]
)
def test_the_api_and_the_cli_write_the_same_file(tmp_path, kwargs, flags):
    from sketchsim import api
    from sketchsim.cli import main

    api_file, cli_file = tmp_path / "api.json", tmp_path / "cli.json"
    got = api.ablation(json_path=api_file, **kwargs)
    res = CliRunner().invoke(main, ["ablation", *flags, "--json", str(cli_file)])
    assert res.exit_code == 0, res.output
    assert _result(api_file) == _result(cli_file)
    if not flags[0].startswith("--screen"):  # the ablation's rows have no timings
        assert api_file.read_bytes() == cli_file.read_bytes()
    assert _result(cli_file)["rows"] == [
        {k: v for k, v in row.items() if k != "seconds"} for row in got.rows
    ]
    if kwargs.get("kernel_rank") == 0:  # softmax alone: one run per seed, no kernel head
        assert [r["model"] for r in got.rows] == ["softmax", "softmax"]
        assert _result(cli_file)["parameters"]["kernel_rank"] == 0


def test_the_stop_screen_takes_one_kernel_rank():
    from sketchsim.cli import main

    res = CliRunner().invoke(main, ["ablation", "--screen-stop", "0.1", "--ranks", "4,8"])
    assert res.exit_code == 2 and "--ranks with --screen-stop is one rank" in res.output


def _row(scale, model, stop, seed, acc, steps):
    return {"scale": scale, "model": model, "stop_below": stop, "seed": seed,
            "validation_accuracy": acc, "steps": steps}  # fmt: skip


def test_the_stop_screen_computes_its_table():
    rows = [
        _row("8:64:50", "softmax", 0.3, 0, 0.9, 10),
        _row("8:64:50", "softmax", 0.3, 1, 0.7, 10),
        _row("10:64:50", "softmax", 0.3, 0, 0.8, 10),
        _row("8:64:50", "kernel", 0.3, 0, 0.5, 10),
        _row("10:64:50", "kernel", 0.3, 0, 0.6, 4),
    ]
    run = ScreenStopRun(ScreenStopPlan((0.3,), "8:64:50,10:64:50", steps=10), rows, 0.3)
    assert run.scales == ["8:64:50", "10:64:50"]
    assert run.configs == [("softmax", 0.3), ("kernel", 0.3)]
    assert run.accuracies("softmax", 0.3, "8:64:50") == [0.9, 0.7]
    assert run.worst("softmax", 0.3) == 0.7 and run.worst("kernel", 0.3) == 0.5
    assert run.kernel_steps() == (1, 2)
    assert ScreenStopRun(run.plan, rows[:3]).kernel_steps() is None


@pytest.mark.parametrize(
    "plan, needle",
    [
        (AblationPlan(seeds=0), "--seeds and --steps must be >= 1"),
        (AblationPlan(triples=10**8), "--triples = 100,000,000 is above the limit"),
        (ScreenMapsPlan("8:64:50", ranks=(0,)), "--ranks must be >= 1"),
        (ScreenMapsPlan("8:64:50", lr=0.0), "--lr must be in"),
        (ScreenMapsPlan("8:64"), "is not m:pool:triples"),
        (ScreenStopPlan((0.7,)), r"stop margins must be in \(0, 0.5\]"),
        (ScreenStopPlan(()), r"stop margins must be in \(0, 0.5\]"),
        (ScreenStopPlan((0.1,), kernel_rank=-1), "one rank >= 0"),
    ],
)
def test_plans_are_refused_before_any_training(plan, needle):
    with pytest.raises(SketchsimError, match=needle):
        plan.validate()
