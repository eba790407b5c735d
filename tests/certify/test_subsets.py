"""The exact pair subset against brute force, and against the greedy choice."""

import itertools
import math

import numpy as np
import pytest

from sketchsim.certify import build_witness, certify
from sketchsim.certify.certificate import build_graph, chain_dp, choose_pairs, pair_matrix
from sketchsim.certify.codes import greedy_code
from sketchsim.certify.subsets import optimal_pairs, subset_bound


def _brute_force(P):
    """Every subset by itertools: the best (rank, value), rank as Lemma 4 certifies it."""
    n = P.shape[0]
    best = (0, 0.0)
    for k in range(1, n + 1):
        for S in itertools.combinations(range(n), k):
            total = 0.0
            ok = True
            for i in S:
                for j in S:
                    if i != j:
                        if not math.isfinite(P[i, j]):
                            ok = False
                        else:
                            total += P[i, j] ** 2
            if not ok:
                continue
            value = k * k / (k + total)
            rank = math.floor(value + 1e-9) + 1 if k >= 2 else math.ceil(value - 1e-9)
            best = max(best, (rank, value))
    return best


@pytest.mark.parametrize("seed", range(6))
def test_the_exact_choice_is_the_brute_force_optimum(seed):
    rng = np.random.default_rng(seed)
    n = 7 + seed % 3
    P = rng.choice([0.05, 0.2, 0.5, 1.0, np.inf], size=(n, n), p=[0.3, 0.3, 0.2, 0.1, 0.1])
    np.fill_diagonal(P, 0.0)
    keep = optimal_pairs(P)
    value = subset_bound(P, keep)
    rank = math.floor(value + 1e-9) + 1 if keep.size >= 2 else math.ceil(value - 1e-9)
    assert (rank, pytest.approx(value)) == _brute_force(P)


def test_the_exact_choice_beats_greedy_on_distance_4_codes():
    """Greedy keeps 6 words of the 16-word (12, 4, 6) lexicode for a bound of 1.76 (r >= 2);
    the best subset is 3 words with 2.13 (r >= 3)."""
    fam = build_witness(greedy_code(12, 4, 6, limit=16), "g", chains=True)
    g = build_graph(fam)
    P = pair_matrix(g, chain_dp(g, 0.5))
    greedy, exact = choose_pairs(P), optimal_pairs(P)
    assert subset_bound(P, exact) > subset_bound(P, greedy) + 0.3
    cert = certify(fam, eps_list=())
    assert cert.subset == {"0.5": "exact"} and cert.certified_rank["0.5"] == 3
