"""The OOD validation split (inside the train pool) and the feature-map screen that uses it."""

import numpy as np
import pytest

from sketchsim.errors import SketchsimError
from sketchsim.experiments.suites import ood_splits, ood_validation


def _tokens(split):
    return {t.tobytes() for t in split.tokens.reshape(-1, split.tokens.shape[-1])}


@pytest.mark.parametrize(("m", "pool", "triples", "seed"), [(8, 64, 300, 0), (6, 12, 50, 3)])
def test_validation_never_sees_the_test_pool(m, pool, triples, seed):
    train, test = ood_splits(m, pool, triples, seed)
    fit, val = ood_validation(m, pool, triples, seed)
    assert not _tokens(fit) & _tokens(val)  # disjoint halves
    assert not (_tokens(fit) | _tokens(val)) & _tokens(test)  # the test pool stays unseen
    assert len(_tokens(fit)) <= pool // 2 and len(_tokens(val)) <= pool - pool // 2
    assert fit.tokens.shape == val.tokens.shape == (triples, 3, m)
    # targets are Min-IP of the drawn triples, every position scored
    t = fit.tokens.astype(int)
    want = np.einsum("bim,bjm->bij", t, t).min(-1)
    assert np.array_equal(fit.targets, want) and fit.scored is None
    again = ood_validation(m, pool, triples, seed)
    assert np.array_equal(again[0].tokens, fit.tokens)


def test_a_tiny_pool_has_no_validation_split():
    with pytest.raises(SketchsimError, match="at least 6 tokens"):
        ood_validation(4, 4, 10, 0)


def test_the_screen_scores_every_nonnegative_parametric_map():
    pytest.importorskip("torch", reason="the torch extra is not installed")
    from sketchsim.experiments.ablation import screen_maps

    rows = screen_maps("5:12:40", (2,), 1, steps=3)
    maps = [r["feature_map"] for r in rows]
    assert maps == ["mlp", "elu1", "relu", "relu2", "favor", "hedgehog", "expmap"]
    assert all(0 <= r["validation_accuracy"] <= 1 and r["steps"] <= 3 for r in rows)
    again = screen_maps("5:12:40", (2,), 1, steps=3)
    assert _untimed(again) == _untimed(rows)  # seeded: the same numbers


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--screen-maps", "8:4"], "is not m:pool:triples"),
        (["--screen-maps", "8:64:100", "--ranks", "16,x"], "comma-separated integers"),
        (["--screen-maps", "8:64:100", "--ranks", "0"], "must be >= 1"),
        (["--screen-stop", "0.1,x"], "comma-separated numbers"),
        (["--screen-stop", "0.6"], "must be in (0, 0.5]"),
        (["--screen-stop", "0.1", "--lr", "nan"], "--lr must be in (0, 1e6]"),
        (["--screen-maps", "8:64:100", "--lr", "0"], "--lr must be in (0, 1e6]"),
        (["--screen-stop", "0.1", "--scales", "8:64"], "is not m:pool:triples"),
    ],
)
def test_the_screen_refuses_bad_input_with_one_line(args, needle, capsys):
    pytest.importorskip("torch", reason="the torch extra is not installed")
    from click.testing import CliRunner
    from cliutil import assert_error_line

    from sketchsim.cli import main

    assert_error_line(CliRunner().invoke(main, ["ablation", *args]), needle)


def test_the_stop_screen_trains_softmax_at_every_margin_and_the_kernel_once():
    pytest.importorskip("torch", reason="the torch extra is not installed")
    from sketchsim.experiments.ablation import screen_stops

    rows = screen_stops("5:12:40,6:16:40", (0.25, 0.1), 2, steps=5, kernel=("elu1", 2))
    got = [(r["scale"], r["model"], r["stop_below"], r["seed"]) for r in rows]
    want = [
        (scale, model, s, seed)
        for scale in ("5:12:40", "6:16:40")
        for seed in (0, 1)
        for model, s in (("softmax", 0.25), ("softmax", 0.1), ("kernel", 0.25))
    ]
    assert got == want
    assert all(0 <= r["validation_accuracy"] <= 1 and r["steps"] <= 5 for r in rows)
    again = screen_stops("5:12:40,6:16:40", (0.25, 0.1), 2, steps=5, kernel=("elu1", 2))
    assert _untimed(again) == _untimed(rows)  # seeded: the same numbers


def _untimed(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k != "seconds"} for r in rows]


def _row(model, s, acc):
    return {"model": model, "stop_below": s, "validation_accuracy": acc}


def test_the_margin_with_the_best_worst_softmax_accuracy_is_picked():
    from sketchsim.experiments.ablation import pick_margin

    rows = [
        _row("softmax", 0.25, 0.99),
        _row("softmax", 0.25, 0.90),  # worst of 0.25
        _row("softmax", 0.1, 0.95),
        _row("softmax", 0.1, 0.93),
        _row("softmax", 0.05, 0.93),
        _row("softmax", 0.05, 0.94),
        _row("kernel", 0.25, 0.50),  # kernel rows do not vote
    ]
    assert pick_margin(rows) == 0.1
    # a tie goes to the larger margin (the earlier stop)
    tie = [_row("softmax", 0.25, 0.9), _row("softmax", 0.1, 0.9)]
    assert pick_margin(tie) == 0.25
