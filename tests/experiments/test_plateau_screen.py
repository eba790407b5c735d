"""The plateau ablation: one change at a time to the OOD kernel protocol, on validation only."""

import pytest

torch = pytest.importorskip("torch", reason="the torch extra is not installed")
torch.set_num_threads(1)

from sketchsim.experiments.ablation import screen_maps, screen_plateau  # noqa: E402

SCALE = "6:16:60"


def test_the_default_variant_is_the_validation_screen_of_the_ood_protocol():
    rows = screen_plateau(SCALE, 4, 1, steps=30, variants={"default": {}})
    (ref,) = screen_maps(SCALE, (4,), 1, steps=30, maps=("elu1",))
    assert rows[0]["validation_accuracy"] == pytest.approx(ref["validation_accuracy"])
    assert rows[0]["train_sequence_error"] == pytest.approx(ref["train_sequence_error"])
    assert rows[0]["steps"] == ref["steps"]


def test_each_variant_changes_what_it_names():
    rows = {r["variant"]: r for r in screen_plateau(SCALE, 2, 1, steps=5)}
    base = rows["default"]
    assert base["step_cap"] == 5 and base["triples"] == 60 and base["rank"] == 2
    assert rows["4x steps"]["step_cap"] == 20
    assert rows["float64"]["dtype"] == "float64"
    assert rows["2x triples"]["triples"] == 120
    assert rows["4x rank"]["rank"] == 8
    for r in rows.values():
        assert r["reached_margin"] == (r["steps"] < r["step_cap"])
        wrong = r["wrong_positions"]
        assert 0 <= wrong <= 3 * r["triples"]
        assert (r["near_miss"] is None) == (wrong == 0)
        assert r["near_miss"] is None or 0 <= r["near_miss"] <= 1
        assert r["validation_accuracy"] < 1 or wrong == 0
    again = {r["variant"]: r for r in screen_plateau(SCALE, 2, 1, steps=5)}
    untimed = {k: {f: v for f, v in r.items() if f != "seconds"} for k, r in rows.items()}
    assert {k: {f: v for f, v in r.items() if f != "seconds"} for k, r in again.items()} == untimed
