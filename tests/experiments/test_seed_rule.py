"""The OOD seed count: the rule in the library, and the plan's count recomputed from its pilot."""

import json
import math
from pathlib import Path

import pytest
from scipy.stats import chi2, t

from sketchsim.errors import SketchsimError
from sketchsim.experiments.plan import OOD_SEED_RULE, default_plan
from sketchsim.experiments.stats import pooled_seed_sd, seed_count_rule, seeds_for_half_width

ROOT = Path(__file__).resolve().parents[2]


def _run(rank, seed, acc, scale="8:64:2000", model="kernel"):
    spec = {"scale": scale, "model": model, "feature_map": "elu1", "rank": rank, "seed": seed}
    return {"spec": spec, "test_accuracy": acc}


def test_the_pooled_sd_uses_only_cells_near_the_threshold():
    rows = [_run(4, s, a) for s, a in enumerate((0.70, 0.80, 0.90))]  # mean 0.80: far
    rows += [_run(8, s, a) for s, a in enumerate((0.94, 0.95, 0.96))]  # ss 2e-4, df 2
    rows += [_run(16, s, a) for s, a in enumerate((0.97, 0.99))]  # ss 2e-4, df 1
    rows += [_run(0, s, a, model="softmax") for s, a in enumerate((0.95, 0.5))]  # never pooled
    got = pooled_seed_sd(rows, "test_accuracy", 0.95, 0.05)
    assert got["cells"] == 2 and got["df"] == 3
    assert got["sd"] == pytest.approx(math.sqrt(4e-4 / 3))


def test_seeds_for_half_width_is_the_smallest_count_that_reaches_it():
    n = seeds_for_half_width(0.015, 0.01)
    half = lambda k: t.ppf(0.975, k - 1) * 0.015 / math.sqrt(k)  # noqa: E731
    assert half(n) <= 0.01 < half(n - 1)
    assert seeds_for_half_width(0.0, 0.01) == 3  # an interval needs 3 seeds
    assert seeds_for_half_width(1.0, 1e-6, max_seeds=50) == 50


def test_the_rule_plans_for_the_upper_bound_of_the_spread():
    rows = [_run(r, s, 0.95 + d) for r in (8, 16) for s, d in enumerate((-0.01, 0.0, 0.01))]
    rule = seed_count_rule(rows, 0.95, half_width=0.005)
    assert rule["pooled_sd"] == pytest.approx(0.01) and rule["df"] == 4
    assert rule["sd_upper"] == pytest.approx(0.01 * math.sqrt(4 / chi2.ppf(0.05, 4)))
    assert rule["seeds"] == seeds_for_half_width(rule["sd_upper"], 0.005)
    assert rule["seeds"] > seeds_for_half_width(rule["pooled_sd"], 0.005)
    with pytest.raises(SketchsimError):
        seed_count_rule(rows, 0.5)  # no cell near that threshold


def test_the_ood_plan_has_the_seed_count_its_rule_gives_on_the_committed_pilot():
    pilot = json.loads((ROOT / OOD_SEED_RULE["pilot"]).read_text())
    assert pilot["header"]["seeds"] == 3  # the pilot is the three-seed sweep
    rule = seed_count_rule(
        pilot["runs"],
        OOD_SEED_RULE["threshold"],
        half_width=OOD_SEED_RULE["half_width"],
        band=OOD_SEED_RULE["band"],
    )
    plan = default_plan("ood")
    assert rule["seeds"] == OOD_SEED_RULE["seeds"] == plan.seeds == plan.softmax_seeds
    assert OOD_SEED_RULE["threshold"] == plan.accuracy
