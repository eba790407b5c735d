"""Seed statistics: the Student-t interval and the transition read off its lower end."""

import math

import pytest

from sketchsim.experiments.stats import (
    falls_with_scale,
    interval_transition,
    mean_interval,
    ols_slope,
    rank_trend,
    scale_trend,
    with_intervals,
)


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
    assert interval_transition(cells, 0.95) == {
        "8:64:2000": {"rank": 8, "low": 4, "supported": True}
    }


def _cell(rank, low, high):
    return {"scale": "8:64:2000", "model": "kernel", "feature_map": "elu1", "rank": rank,
            "mean": (low + high) / 2, "ci_low": low, "ci_high": high}  # fmt: skip


def test_the_transition_bracket_runs_from_the_first_interval_reaching_the_threshold():
    cells = [_cell(4, 0.80, 0.90), _cell(8, 0.90, 0.96), _cell(16, 0.94, 0.97), _cell(32, 0.96, 1)]
    assert interval_transition(cells, 0.95) == {
        "8:64:2000": {"rank": 32, "low": 8, "supported": True}
    }
    none = interval_transition(cells[:1], 0.95)["8:64:2000"]
    assert none == {"rank": None, "low": None, "supported": True}


def test_ols_slope_and_its_interval_match_scipy_linregress():
    from scipy.stats import linregress, t

    x = [8, 8, 10, 10, 12, 12, 12]
    y = [0.97, 0.99, 0.95, 0.96, 0.93, 0.95, 0.94]
    fit = ols_slope(x, y)
    ref = linregress(x, y)
    half = t.ppf(0.975, len(x) - 2) * ref.stderr
    assert fit["slope"] == pytest.approx(ref.slope)
    assert fit["ci_low"] == pytest.approx(ref.slope - half)
    assert fit["ci_high"] == pytest.approx(ref.slope + half)
    assert ols_slope([8, 8, 8], [0.9, 0.8, 0.7])["ci_low"] is None  # constant x
    assert ols_slope([8, 10], [0.9, 0.8])["slope"] is None  # two points


def _run(scale, rank, seed, acc, model="kernel"):
    spec = {"scale": scale, "model": model, "feature_map": "elu1", "rank": rank, "seed": seed}
    return {"spec": spec, "test_accuracy": acc}


def test_scale_trend_is_the_slope_per_bit_of_m_at_each_rank():
    noise = (-0.002, 0.0, 0.002)
    rows = [
        _run(f"{m}:64:2000", r, s, 0.99 - k * 0.01 * m + e)
        for k, r in ((1, 8), (0, 64))  # r = 8 falls 0.01 per bit, r = 64 is flat
        for m in (8, 10, 12)
        for s, e in enumerate(noise)
    ]
    rows.append(_run("8:64:2000", 0, 0, 0.1, model="softmax"))  # not a kernel rank
    trend = {c["rank"]: c for c in scale_trend(rows)}
    assert set(trend) == {8, 64}
    assert trend[8]["slope"] == pytest.approx(-0.01) and trend[8]["ci_high"] < 0
    assert trend[8]["n"] == 9 and trend[8]["scales"] == 3
    assert trend[64]["ci_low"] < 0 < trend[64]["ci_high"]
    assert not falls_with_scale(scale_trend(rows), "elu1")  # r = 64 does not fall
    falling = [r for r in rows if r["spec"]["rank"] == 8]
    assert falls_with_scale(scale_trend(falling), "elu1")
    assert not falls_with_scale(scale_trend(falling), "relu")  # no such map: no verdict


def test_rank_trend_is_the_gain_per_doubling_of_r_at_each_scale():
    rows = [
        _run(scale, r, s, 0.80 + gain * math.log2(r) + e)
        for scale, gain in (("10:128:2000", 0.02), ("8:64:2000", 0.04))
        for r in (4, 8, 16, 32)
        for s, e in enumerate((-0.001, 0.001, 0.0))
    ]
    trend = rank_trend(rows)
    assert [c["scale"] for c in trend] == ["8:64:2000", "10:128:2000"]  # by m, not by text
    assert trend[0]["slope"] == pytest.approx(0.04) and trend[1]["slope"] == pytest.approx(0.02)
    assert trend[1]["ci_low"] > 0.015
