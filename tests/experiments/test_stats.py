"""Seed statistics: the Student-t interval and the transition read off its lower end."""

import math

import pytest

from sketchsim.experiments.stats import interval_transition, mean_interval, with_intervals


def test_the_interval_is_the_student_t_interval_of_the_mean():
    low, high = mean_interval([0.9, 0.95, 1.0])
    half = 4.302652729911275 * 0.05 / math.sqrt(3)  # t(0.975, 2), sd 0.05
    assert low == pytest.approx(0.95 - half) and high == 1.0  # clipped at 1
    assert mean_interval([0.5, 0.5, 0.5]) == (0.5, 0.5)
    assert mean_interval([0.9, 1.0]) is None  # fewer than 3 seeds: no interval
    assert mean_interval([0.9, float("nan"), 1.0]) is None


def test_cells_get_their_seed_interval_and_the_transition_needs_its_lower_end():
    def run(rank, seed, acc):
        spec = {"scale": "8:64:2000", "model": "kernel", "feature_map": "elu1", "rank": rank}
        return {"spec": spec | {"seed": seed}, "test_accuracy": acc}

    runs = [run(4, s, a) for s, a in enumerate((0.90, 0.99, 0.99))]
    runs += [run(8, s, a) for s, a in enumerate((0.97, 0.98, 0.99))]
    summary = [
        {"scale": "8:64:2000", "model": "kernel", "feature_map": "elu1", "rank": r, "mean": m}
        for r, m in ((4, 0.96), (8, 0.98))
    ]
    cells = with_intervals(runs, "test_accuracy", summary)
    assert cells[0]["ci_low"] < 0.95 < cells[0]["mean"]  # the mean crosses, the interval not
    assert cells[1]["ci_low"] > 0.95
    assert interval_transition(cells, 0.95) == {"8:64:2000": {"rank": 8, "supported": True}}
