"""The OOD row of the reproduce report: the transition per map and scale, from a summary."""

from sketchsim.experiments.reproduce import OOD_ACCURACY, Settings, _ood_transition_row


def _summary(curves):
    return [
        {"scale": scale, "model": "kernel", "feature_map": fmap, "rank": r, "mean": acc}
        for (scale, fmap), by_rank in curves.items()
        for r, acc in by_rank.items()
    ]


def _cfg(maps=("elu1",)):
    cfg = Settings.of(quick=False)
    cfg.scales, cfg.ood_ranks, cfg.ood_maps = "8:64:100,10:128:100,12:256:100", (4, 16, 64), maps
    return cfg


def test_the_row_names_the_rank_and_mean_per_scale_and_says_yes_when_it_grows():
    acc = _summary(
        {
            ("8:64:100", "elu1"): {4: 0.9, 16: 0.96, 64: 0.99},
            ("10:128:100", "elu1"): {4: 0.8, 16: 0.94, 64: 0.97},
            ("12:256:100", "elu1"): {4: 0.7, 16: 0.90, 64: 0.951},
        }
    )
    row = _ood_transition_row(acc, _cfg(), ["elu1"])
    assert str(OOD_ACCURACY) in row.claim
    # one map swept: transition_grows names it "" (keys are bare scales)
    assert _ood_transition_row(acc, _cfg(), [""]).agrees == row.agrees
    assert row.measured == (
        "elu1 (mean of 2 seed(s), r = 4-64): 8:64:100: r = 16 (0.960); "
        "10:128:100: r = 64 (0.970); 12:256:100: r = 64 (0.951)"
    )
    assert row.agrees.startswith("yes (elu1)")


def test_a_scale_without_a_transition_shows_its_best_mean_and_the_row_says_no():
    acc = _summary(
        {
            ("8:64:100", "favor"): {4: 0.9, 16: 0.96, 64: 0.99},
            ("10:128:100", "favor"): {4: 0.8, 16: 0.94, 64: 0.93},
            ("12:256:100", "favor"): {4: 0.7, 16: 0.90, 64: 0.92},
        }
    )
    row = _ood_transition_row(acc, _cfg(("favor",)), [])
    assert "10:128:100: none (best 0.940 at r = 16)" in row.measured
    assert "12:256:100: none (best 0.920 at r = 64)" in row.measured
    assert row.agrees.startswith("NO")


def test_the_softmax_ood_verdict_names_the_scales_below_the_bar():
    from sketchsim.experiments.reproduce import SOFTMAX_OOD_ACCURACY, _softmax_ood_verdict

    ok = [{"scale": "8:64:100", "min": 1.0}, {"scale": "10:128:100", "min": SOFTMAX_OOD_ACCURACY}]
    assert _softmax_ood_verdict(ok) == "yes"
    short = ok + [{"scale": "12:256:100", "min": 0.9885}]
    verdict = _softmax_ood_verdict(short)
    assert verdict.startswith("NO: below 0.99 at 12:256:100 (worst seed 0.9885)")
    assert "8:64:100" not in verdict
    assert _softmax_ood_verdict([]).startswith("NO")
