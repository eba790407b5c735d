"""The OOD transition detector on synthetic summaries whose answer is known."""

from sketchsim.experiments.sweep_summary import summarize, transition, transition_grows


def _rows(curves):
    """Rows of a sweep: ``curves[(scale, map)] = {rank: [accuracy per seed]}``."""
    rows = []
    for (scale, fmap), by_rank in curves.items():
        for r, accs in by_rank.items():
            for seed, acc in enumerate(accs):
                spec = {"scale": scale, "model": "kernel", "feature_map": fmap, "rank": r}
                rows.append({"spec": {**spec, "seed": seed}, "test_accuracy": acc})
    return rows


def test_the_mean_over_seeds_decides_not_the_best_seed():
    rows = _rows({("8:64:1000", "elu1"): {8: [0.99, 0.90], 16: [0.96, 0.95], 4: [0.5, 0.6]}})
    # r = 8: one seed above 0.95 but the mean (0.945) is below; r = 16's mean is 0.955
    assert transition(summarize(rows, "test_accuracy"), 0.95) == {"8:64:1000": 16}


def test_the_smallest_rank_even_when_a_larger_one_dips_below():
    rows = _rows({("a", "favor"): {64: [0.93, 0.93], 32: [0.97, 0.96], 16: [0.9, 0.9]}})
    assert transition(summarize(rows, "test_accuracy"), 0.95) == {"a": 32}
    assert transition(summarize(rows, "test_accuracy"), 0.98) == {"a": None}


def test_exactly_at_the_threshold_counts():
    rows = _rows({("a", "elu1"): {2: [0.25, 0.75], 4: [1.0, 1.0]}})
    assert transition(summarize(rows, "test_accuracy"), 0.5) == {"a": 2}


def test_scales_in_numeric_order_and_maps_apart():
    curves = {}
    for scale, needed in (("12:256:1000", 64), ("8:64:1000", 8), ("10:128:1000", 16)):
        curves[(scale, "elu1")] = {r: [0.97 if r >= needed else 0.6] * 2 for r in (4, 8, 16, 64)}
        curves[(scale, "mlp")] = {r: [0.97 if r >= 16 else 0.6] * 2 for r in (4, 8, 16, 64)}
    found = transition(summarize(_rows(curves), "test_accuracy"), 0.95)
    assert list(found) == [
        "8:64:1000 (elu1)",
        "8:64:1000 (mlp)",
        "10:128:1000 (elu1)",
        "10:128:1000 (mlp)",
        "12:256:1000 (elu1)",
        "12:256:1000 (mlp)",
    ]
    assert [found[f"{s} (elu1)"] for s in ("8:64:1000", "10:128:1000", "12:256:1000")] == [
        8,
        16,
        64,
    ]
    # mlp needs r = 16 at every scale: it exists but does not grow
    assert transition_grows(found) == ["elu1"]


def test_grows_needs_every_scale_and_no_step_down():
    assert transition_grows({"a (f)": 8, "b (f)": None, "c (f)": 64}) == []
    assert transition_grows({"a (f)": 16, "b (f)": 8, "c (f)": 64}) == []
    assert transition_grows({"a (f)": 8, "b (f)": 8, "c (f)": 16}) == ["f"]
    assert transition_grows({"a (f)": 8, "b (f)": 16, "c (f)": 16}) == ["f"]
    assert transition_grows({"a (f)": 8, "b (f)": 16, "c (f)": 32, "d (f)": 64}, 4) == ["f"]
    assert transition_grows({"a (f)": 8, "b (f)": 16, "c (f)": 32}, min_scales=4) == []
