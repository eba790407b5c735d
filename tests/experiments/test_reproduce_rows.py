"""The OOD rows of the reproduce report: the interval transition per scale, the softmax verdict."""

from sketchsim.experiments.plan import default_plan
from sketchsim.experiments.reproduce import _ood_transition_row
from sketchsim.experiments.stats import interval_transition

SCALES = "8:64:100,10:128:100,12:256:100"


def _summary(curves, half=0.01):
    return [
        {
            "scale": scale,
            "model": "kernel",
            "feature_map": fmap,
            "rank": r,
            "mean": acc,
            "ci_low": acc - half,
            "ci_high": min(1.0, acc + half),
        }
        for (scale, fmap), by_rank in curves.items()
        for r, acc in by_rank.items()
    ]


def _trend(slopes, fmap="elu1"):
    """scale_trend cells: ``{rank: (slope, ci_low, ci_high)}``."""
    return [
        {
            "feature_map": fmap,
            "rank": r,
            "scales": 3,
            "slope": v,
            "ci_low": lo,
            "ci_high": hi,
            "n": 9,
        }
        for r, (v, lo, hi) in slopes.items()
    ]


FALLS = {4: (-0.02, -0.03, -0.01), 16: (-0.01, -0.015, -0.005), 64: (-0.004, -0.006, -0.001)}


def _plan(maps=("elu1",)):
    return default_plan("ood").with_(
        scales=SCALES, ranks=(4, 16, 64), feature_maps=maps, seeds=3, softmax_seeds=3
    )


def test_the_row_names_the_rank_and_interval_per_scale_and_says_yes_when_it_grows():
    acc = _summary(
        {
            ("8:64:100", "elu1"): {4: 0.9, 16: 0.97, 64: 0.99},
            ("10:128:100", "elu1"): {4: 0.8, 16: 0.955, 64: 0.97},
            ("12:256:100", "elu1"): {4: 0.7, 16: 0.90, 64: 0.961},
        }
    )
    plan = _plan()
    row = _ood_transition_row(acc, plan, interval_transition(acc, plan.accuracy), _trend(FALLS))
    assert "95% interval" in row.claim and "0.95" in row.claim
    # 10:128: the mean 0.955 crosses 0.95 at r = 16 but its interval (0.945-) does not
    assert row.measured == (
        "elu1 (mean and 95% interval of 3 seeds, r = 4-64): "
        "8:64:100: r = 16 (0.970, 0.960-0.980), bracket r = 16-16; "
        "10:128:100: r = 64 (0.970, 0.960-0.980), bracket r = 16-64; "
        "12:256:100: r = 64 (0.961, 0.951-0.971), bracket r = 64-64; "
        "accuracy per bit of m at fixed r (95% interval): r = 4: -0.0200 (-0.0300 to -0.0100), "
        "r = 16: -0.0100 (-0.0150 to -0.0050), r = 64: -0.0040 (-0.0060 to -0.0010)"
        " / seed means cross it at r = 16, 16, 64"
    )
    assert row.agrees.startswith("yes (elu1)")


def test_a_growing_transition_without_a_falling_trend_at_every_rank_says_no():
    acc = _summary(
        {
            ("8:64:100", "elu1"): {4: 0.9, 16: 0.97, 64: 0.99},
            ("10:128:100", "elu1"): {4: 0.8, 16: 0.955, 64: 0.97},
            ("12:256:100", "elu1"): {4: 0.7, 16: 0.90, 64: 0.961},
        }
    )
    plan = _plan()
    found = interval_transition(acc, plan.accuracy)
    flat = FALLS | {64: (-0.001, -0.003, 0.001)}  # r = 64: the interval reaches 0
    row = _ood_transition_row(acc, plan, found, _trend(flat))
    assert row.agrees.startswith("NO: accuracy does not fall with m at every rank")
    assert "r = 64: -0.0010 (-0.0030 to +0.0010)" in row.measured
    # a falling trend alone does not make the row say yes when the transition is flat
    same = {k: dict(v) for k, v in _curves_flat().items()}
    flat_acc = _summary(same)
    row = _ood_transition_row(
        flat_acc, plan, interval_transition(flat_acc, plan.accuracy), _trend(FALLS)
    )
    assert row.agrees == (
        "NO: the interval transition does not grow with the scale (see docs/results.md)"
    )


def _curves_flat():
    curve = {4: 0.9, 16: 0.97, 64: 0.99}
    return {(s, "elu1"): curve for s in ("8:64:100", "10:128:100", "12:256:100")}


def test_a_scale_without_a_transition_shows_its_best_mean_and_the_row_says_no():
    acc = _summary(
        {
            ("8:64:100", "favor"): {4: 0.9, 16: 0.97, 64: 0.99},
            ("10:128:100", "favor"): {4: 0.8, 16: 0.94, 64: 0.93},
            ("12:256:100", "favor"): {4: 0.7, 16: 0.90, 64: 0.92},
        }
    )
    plan = _plan(("favor",))
    row = _ood_transition_row(
        acc, plan, interval_transition(acc, plan.accuracy), _trend(FALLS, "favor")
    )
    assert "10:128:100: none (best mean 0.940 at r = 16)" in row.measured
    assert "12:256:100: none (best mean 0.920 at r = 64)" in row.measured
    assert row.agrees.startswith("NO")


def test_too_few_seeds_give_no_transition():
    acc = _summary({("8:64:100", "elu1"): {4: 0.99, 16: 1.0}})
    acc[0]["ci_low"] = acc[0]["ci_high"] = None  # one seed at r = 4
    assert interval_transition(acc, 0.95) == {
        "8:64:100": {"rank": None, "low": None, "supported": False}
    }


def test_the_softmax_ood_verdict_names_the_scales_below_the_bar():
    from sketchsim.experiments.reproduce import SOFTMAX_OOD_ACCURACY, _softmax_ood_verdict

    ok = [{"scale": "8:64:100", "min": 1.0}, {"scale": "10:128:100", "min": SOFTMAX_OOD_ACCURACY}]
    assert _softmax_ood_verdict(ok) == "yes"
    short = ok + [{"scale": "12:256:100", "min": 0.9885}]
    verdict = _softmax_ood_verdict(short)
    assert verdict.startswith("NO: below 0.99 at 12:256:100 (worst seed 0.9885)")
    assert "8:64:100" not in verdict
    assert _softmax_ood_verdict([]).startswith("NO")
