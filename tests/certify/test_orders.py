import numpy as np
import pytest

from sketchsim.certify.orders import (
    block_queries,
    demand_margin,
    is_shattered,
    largest_shattered,
    order_demands,
    order_lower_bound,
    pentagon_queries,
    restrict,
    separating_order,
)
from sketchsim.certify.table_rank import load_table_head
from sketchsim.errors import SketchsimError


def ov(a, b):
    return bin(a & b).count("1")


def test_demands_follow_the_gap_two_rule():
    for P, N in order_demands(4):
        assert P.isdisjoint(N)
    # brute force at m = 4: every (x, u, u') with gap >= 2 is inside some demand
    demands = order_demands(4)
    for u in range(16):
        for v in range(16):
            P = frozenset(x for x in range(16) if ov(x, v) - ov(x, u) >= 2)
            N = frozenset(x for x in range(16) if ov(x, u) - ov(x, v) >= 2)
            if P and N:
                assert (P, N) in demands
    assert order_demands(3) == []  # no key pair separates two queries: r*(3) = 1 is possible


def test_is_shattered_on_a_hand_made_system():
    d = [(frozenset({1}), frozenset({2, 3})), (frozenset({2}), frozenset({1, 3}))]
    assert is_shattered(d, [1, 2]) and not is_shattered(d, [1, 2, 3])
    d.append((frozenset({1, 2}), frozenset({3})))
    assert is_shattered(d, [1, 2, 3])


@pytest.mark.parametrize("m,size", [(3, 1), (4, 2), (5, 2), (6, 3)])
def test_largest_shattered(m, size):
    got, example = largest_shattered(m)
    assert got == size and is_shattered(order_demands(m), example)


def test_m4_admits_a_line_order_as_the_rank_2_head_shows():
    demands = order_demands(4)
    order = separating_order(demands)
    assert order is not None
    assert order_lower_bound(4)["lower"] == 2


def test_pentagon_rules_out_rank_2_at_m5():
    q = pentagon_queries(5)
    assert sorted(bin(x).count("1") for x in q) == [2] * 5
    demands = restrict(order_demands(5), q)
    assert separating_order(demands) is None
    # the demand of key pair (e, {0..4} minus e): e apart from its two disjoint edges
    for e in q:
        u, v = 0b11111 & ~e, e
        P = {x for x in q if ov(x, v) - ov(x, u) >= 2}
        N = {x for x in q if ov(x, u) - ov(x, v) >= 2}
        assert P == {e} and N == {f for f in q if f & e == 0} and len(N) == 2
    res = order_lower_bound(5)
    assert res["lower"] == 3 and res["pentagon"] and res["shattered"][0] == 2


def test_separating_order_limit():
    many = [(frozenset({i}), frozenset({i + 1})) for i in range(12)]
    with pytest.raises(SketchsimError, match="limit"):
        separating_order(many)


@pytest.mark.parametrize("m,r", [(4, 2), (5, 3), (6, 4)])
def test_trained_exact_heads_meet_every_demand(m, r):
    alpha, _ = load_table_head(f"docs/minrank/minrank-m{m}-nonneg-r{r}.npz")
    assert demand_margin(alpha) < 1


def test_demand_margin_flags_a_flat_kernel():
    assert demand_margin(np.ones((16, 16))) == 1.0
    alpha = np.ones((16, 16))
    alpha[3, 5] = 0.0
    assert demand_margin(alpha) == np.inf or demand_margin(alpha) >= 1


@pytest.mark.parametrize("m,lower", [(4, 2), (6, 3), (7, 3), (8, 4)])
def test_blocks_are_shattered(m, lower):
    assert is_shattered(order_demands(m), block_queries(m))
    res = order_lower_bound(m, search=False)
    assert res["blocks"] and res["lower"] == lower
