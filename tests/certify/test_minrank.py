import itertools
import json
import math

import naive
import numpy as np
import pytest
from click.testing import CliRunner
from cliutil import assert_error_line

from sketchsim.certify import certify, load_family
from sketchsim.certify.table_rank import (
    certified_lower,
    check_table_head,
    cube,
    load_table_head,
    onehot_construction,
    subset_construction,
    subset_features,
)
from sketchsim.cli import main


@pytest.mark.parametrize("m,causal", [(1, False), (2, True), (3, False)])
def test_check_table_head_matches_naive(m, causal):
    rng = np.random.default_rng(m)
    K = 2**m
    for signed in (False, True):
        alpha = rng.random((K, K)) * 3 - (1.0 if signed else 0.0)
        votes = rng.normal(size=(K, K)) * m
        got = check_table_head(alpha, votes, causal)
        assert got.inputs == K**3
        assert got.max_abs_error == pytest.approx(
            naive.table_head_max_error(alpha, votes, m, causal)
        )
    zero = np.zeros((K, K))  # all weights zero: every denominator vanishes
    res = check_table_head(zero, zero)
    assert not res.exact and res.max_abs_error == math.inf and res.zero_denominators == 3 * K**3


def test_onehot_and_subset_constructions_are_exact_and_small():
    for m in (2, 3, 4):
        oh = onehot_construction(m)
        assert oh.check.exact and oh.rank == 2**m
        sub = subset_construction(m)
        p = sub.params["p"]
        assert sub.rank == sum(math.comb(m, j) for j in range(p + 1)) < 2**m
        phi_q, phi_k = subset_features(m, sub.params["coeffs"])
        assert phi_q.min() >= 0 and phi_k.min() >= 0 and phi_q.shape[1] == sub.rank
        T = cube(m).astype(float)
        assert naive.table_head_max_error(phi_q @ phi_k.T, T @ T.T, m) < 0.5
    assert not onehot_construction(3, beta=0.8).check.exact  # below beta* = ln(6)/2


@pytest.mark.parametrize("m,causal", [(4, False), (6, False), (4, True)])
def test_certificate_search_family_recertifies(tmp_path, m, causal):
    lower, family = certified_lower(m, causal)
    assert lower.recertified_rank == lower.certified_rank == 2
    path = tmp_path / "fam.npz"
    from sketchsim.certify import save_family

    save_family(family, path)
    out = tmp_path / "c.json"
    res = CliRunner().invoke(main, ["certify", str(path), "--json", str(out)])
    assert res.exit_code == 0, res.output
    assert json.loads(out.read_text())["certified_rank"]["0.5"] == lower.certified_rank
    assert load_family(path).position == (3 if causal else 1)
    assert certify(family, eps_list=()).certified_rank["0.5"] == 2


def brute_force_rank1(m):
    """A rank-1 nonnegative head exact on all inputs, by grid search (None if the grid has none).

    Rank 1 means every query weighs the keys by one vector q; the votes are then
    a linear program per query (best_votes).
    """
    from sketchsim.experiments.table_heads import best_votes

    K = 2**m
    for q in itertools.product([1.0, 0.25, 1 / 16], repeat=K):
        alpha = np.outer(np.ones(K), q)
        votes, margin = best_votes(alpha)
        if margin > 0:
            return alpha, votes
    return None


@pytest.mark.slow
@pytest.mark.parametrize("m", [1, 2])
def test_small_m_values_match_brute_force(m, tmp_path):
    pytest.importorskip("torch")
    from sketchsim.experiments.table_heads import minrank_row

    # r = 0 is impossible (every denominator is zero); a rank-1 head exists by brute force
    assert not check_table_head(np.zeros((2**m,) * 2), np.zeros((2**m,) * 2)).exact
    found = brute_force_rank1(m)
    assert found is not None
    assert naive.table_head_max_error(*found, m) < 0.5
    row = minrank_row(m, steps=300, out_dir=tmp_path)
    assert row["lower"]["certified_rank"] == 1
    assert row["trained_nonneg"]["rank"] == 1 and row["trained_signed"]["rank"] == 1
    alpha, votes = load_table_head(row["trained_nonneg"]["weights_file"])
    assert naive.table_head_max_error(alpha, votes, m) < 0.5


def test_rank_one_fails_at_m4_where_the_certificate_says_two():
    pytest.importorskip("torch")
    from sketchsim.experiments.table_heads import train_table_head

    head = train_table_head(4, 2, seed=0, steps=600)
    assert head.exact  # re-checked on all 4096 inputs inside; check again from the weights
    assert check_table_head(head.phi_q @ head.phi_k.T, head.votes).exact
    assert head.phi_q.min() >= 0 and head.phi_k.min() >= 0
    lower, _ = certified_lower(4)
    assert lower.certified_rank == 2  # so r*(4) = 2 exactly


def test_minrank_cli_json_resume_plot(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    import sketchsim.experiments.table_heads as mr

    out, png, d = tmp_path / "m.json", tmp_path / "m.png", tmp_path / "out"
    args = ["minrank", "--m", "1..2", "--steps", "200", "--out-dir", str(d), "--json", str(out)]
    res = CliRunner().invoke(main, [*args, "--plot", str(png)])
    assert res.exit_code == 0, res.output
    data = json.loads(out.read_text())
    assert [r["m"] for r in data["rows"]] == [1, 2] and data["complete"]
    assert data["parameters"]["seeds"] == 1 and "numpy" in data["versions"]
    assert png.stat().st_size > 1000
    calls = []
    real = mr.minrank_row
    monkeypatch.setattr(mr, "minrank_row", lambda m, *a, **k: calls.append(m) or real(m, *a, **k))
    res = CliRunner().invoke(main, [*args[:2], "1..3", *args[3:], "--resume"])
    assert res.exit_code == 0, res.output
    assert calls == [3] and [r["m"] for r in json.loads(out.read_text())["rows"]] == [1, 2, 3]


def test_minrank_needs_torch_for_training(monkeypatch, tmp_path):
    import sys

    monkeypatch.setitem(sys.modules, "torch", None)
    res = CliRunner().invoke(main, ["minrank", "--m", "2", "--out-dir", str(tmp_path)])
    assert_error_line(res, "pip install 'sketchsim[torch]'")


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--m", "0..3"], "widths must be in 1..8"),
        (["--m", "5..2"], "is not a width range"),
        (["--m", "x"], "is not a width range"),
        (["--m", "9"], "widths must be in 1..8"),
        (["--m", "2", "--n", "4"], "length 3"),
        (["--m", "2", "--seeds", "0"], "--seeds must be >= 1"),
        (["--m", "2", "--resume"], "--resume needs --json"),
    ],
)
def test_minrank_bad_input(args, needle, tmp_path):
    res = CliRunner().invoke(main, ["minrank", *args, "--out-dir", str(tmp_path)])
    assert_error_line(res, needle)


def test_a_row_carries_the_sign_order_bound_for_nonnegative_heads():
    from sketchsim.experiments.table_heads import minrank_row, nonneg_lower

    row = minrank_row(5, train=False)
    assert row["lower_nonneg"]["pentagon"] and nonneg_lower(row) == 3
    assert row["lower"]["certified_rank"] <= nonneg_lower(row) <= row["construction"]["rank"]
    assert nonneg_lower({}) == 1  # rows made before the bound existed
