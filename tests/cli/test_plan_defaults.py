"""Defaults are written once, in the run objects (#46): the CLI's options and the API's
keyword arguments read them, so a command and its API call run the same plan."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from sketchsim import api
from sketchsim.cli import main
from sketchsim.runs.ablation import AblationPlan, ScreenMapsPlan, ScreenStopPlan
from sketchsim.runs.bound import BoundPlan
from sketchsim.runs.frontier import FrontierPlan
from sketchsim.runs.minrank import MinrankPlan
from sketchsim.runs.transcript import TranscriptPlan


def _field(plan_type, name):
    return next(f.default for f in dataclasses.fields(plan_type) if f.name == name)


def _ints(text):
    return tuple(int(v) for v in text.split(","))


#: (command, option's parameter name, plan, field, option text -> field value)
CLI = [
    ("transcript", "q", TranscriptPlan, "q", None),
    ("transcript", "s", TranscriptPlan, "s", None),
    ("transcript", "samples", TranscriptPlan, "samples", None),
    ("transcript", "seed", TranscriptPlan, "seed", None),
    ("transcript", "family_spec", TranscriptPlan, "family", None),
    ("frontier", "specs", FrontierPlan, "protocols", tuple),
    ("frontier", "q_text", FrontierPlan, "qs", _ints),
    ("frontier", "s_text", FrontierPlan, "ss", _ints),
    ("frontier", "samples", FrontierPlan, "samples", None),
    ("frontier", "search", FrontierPlan, "search", None),
    ("frontier", "seed", FrontierPlan, "seed", None),
    ("minrank", "m_text", MinrankPlan, "widths", _ints),
    ("minrank", "n", MinrankPlan, "n", None),
    ("minrank", "seeds", MinrankPlan, "seeds", None),
    ("minrank", "steps", MinrankPlan, "steps", None),
    ("minrank", "train_max_m", MinrankPlan, "train_max_m", None),
    ("bound", "step", BoundPlan, "step", None),
    ("bound", "seed", BoundPlan, "seed", None),
    ("ablation", "seeds", AblationPlan, "seeds", None),
    ("ablation", "steps", AblationPlan, "steps", None),
    ("ablation", "triples", AblationPlan, "triples", None),
    ("ablation", "lr", ScreenMapsPlan, "lr", None),
    ("ablation", "ranks", ScreenMapsPlan, "ranks", _ints),
    ("ablation", "scales", ScreenStopPlan, "scales", None),
]


@pytest.mark.parametrize(("command", "param", "plan_type", "name", "parse"), CLI)
def test_an_options_default_is_its_plans(command, param, plan_type, name, parse):
    (option,) = [p for p in main.get_command(None, command).params if p.name == param]
    got = option.default if parse is None else parse(option.default)
    assert got == _field(plan_type, name), (command, param)


def test_the_ablation_and_screen_plans_agree_where_one_option_serves_both():
    for name in ("seeds", "steps"):
        assert _field(AblationPlan, name) == _field(ScreenMapsPlan, name)
        assert _field(AblationPlan, name) == _field(ScreenStopPlan, name)
    assert _field(ScreenMapsPlan, "lr") == _field(ScreenStopPlan, "lr")


#: API function -> (plan, {keyword: field})
API = {
    api.transcript: (TranscriptPlan, dict(q="q", s="s", family="family", samples="samples",
                                          seed="seed", exhaustive="exhaustive")),
    api.frontier: (FrontierPlan, dict(family="family", samples="samples", search="search",
                                      seed="seed")),
    api.bound: (BoundPlan, dict(step="step", seed="seed")),
    api.minrank: (MinrankPlan, dict(widths="widths", seeds="seeds", steps="steps",
                                    causal="causal", train_max_m="train_max_m")),
    api.ablation: (AblationPlan, dict(seeds="seeds", steps="steps", triples="triples")),
}  # fmt: skip


@pytest.mark.parametrize("func", list(API), ids=lambda f: f.__name__)
def test_an_api_default_is_its_plans(func):
    plan_type, names = API[func]
    params = inspect.signature(func).parameters
    for keyword, name in names.items():
        assert params[keyword].default == _field(plan_type, name), (func.__name__, keyword)
    if func is api.ablation:
        assert params["lr"].default == _field(ScreenMapsPlan, "lr")
        assert params["ranks"].default == _field(ScreenMapsPlan, "ranks")
        assert params["scales"].default == _field(ScreenStopPlan, "scales")
