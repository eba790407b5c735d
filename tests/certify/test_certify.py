import json
import math
import re

import numpy as np
import pytest
from click.testing import CliRunner
from cliutil import assert_error_line

from sketchsim.certify import WitnessFamily, build_witness, certify, load_family, rho, save_family
from sketchsim.certify.bounds import code_bound
from sketchsim.certify.certificate import build_graph, chain_dp, choose_pairs, pair_matrix
from sketchsim.certify.chains import best_chain_product, best_steps
from sketchsim.certify.codes import greedy_code, hadamard_code
from sketchsim.cli import main
from sketchsim.errors import FamilyError
from sketchsim.heads.attention import OneHot, Softmax
from sketchsim.minip.kernel import minip_targets


def family_from(triples, position=1):
    tokens = np.array(triples, dtype=np.uint8)
    return WitnessFamily(tokens, position, minip_targets(tokens)[:, position - 1], {})


C1, C2 = [1, 1, 1, 0, 0, 0], [0, 0, 0, 1, 1, 1]
X1, X2 = C2, C1  # x_c = complement of c


def tiny(both=True):
    t = []
    for x, c, d in ((X1, C1, C2), (X2, C2, C1)):
        t += [(x, c, c), (x, d, d), (x, c, d)] + ([(x, d, c)] if both else [])
    return family_from(t)


def test_rho_values():
    assert rho(3) == 0.5 and rho(6) == 0.2 and rho(1) == math.inf
    assert rho(3, 0.25) == pytest.approx(0.2)
    assert best_steps(12) == (4, 4, 4) and best_chain_product(12) == pytest.approx(1 / 27)
    assert best_steps(6) == (6,)  # one step of 6 (1/5) beats 3+3 (1/4)


def test_tiny_family_by_hand():
    # gap 3 between the two codewords: P = rho(3) = 1/2 at the limit,
    # r >= 2^2 / (2 + 2 * (1/2)^2) = 1.6, so r >= 2
    cert = certify(tiny(), eps_list=(0.25,))
    assert cert.pairs["0.5"] == 2 and cert.bound["0.5"] == pytest.approx(1.6)
    assert cert.certified_rank["0.5"] == 2
    # eps = 0.25: rho = 0.5 / 2.5 = 0.2, bound 4 / (2 + 2 * 0.04)
    assert cert.bound["0.25"] == pytest.approx(4 / 2.08)


def test_tiny_family_needs_both_orders_for_positional_maps():
    cert = certify(tiny(both=False), eps_list=())
    assert cert.pairs["0.5"] == 1 and cert.certified_rank["0.5"] == 1
    relaxed = certify(tiny(both=False), eps_list=(), positional=False)
    assert relaxed.bound["0.5"] == pytest.approx(1.6)


def test_default_witness_matches_theory_worked_example():
    fam = build_witness(hadamard_code(24), "hadamard", 12)
    assert len(fam.tokens) == 12 * (12 + 2 * 11) == 408
    cert = certify(fam)
    assert cert.bound["0.5"] == pytest.approx(144 / 17.28)
    assert cert.certified_rank["0.5"] == 9 >= 8


def test_monotone_in_eps():
    fam = build_witness(hadamard_code(24, complements=True), "hadamard", 20, chains=True, seed=3)
    eps = [0.05, 0.1, 0.25, 0.4, 0.45, 0.49]
    cert = certify(fam, eps_list=eps)
    values = [cert.bound[f"{e:g}"] for e in eps] + [cert.bound["0.5"]]
    assert all(a >= b - 1e-12 for a, b in zip(values, values[1:], strict=False))
    assert cert.certified_rank["0.05"] <= cert.pairs["0.05"]


def test_jitted_dp_matches_python():
    fam = build_witness(greedy_code(12, 4, 6), "greedy", chains=True, seed=1)
    g = build_graph(fam)
    for eps in (0.5, 0.3):
        np.testing.assert_array_equal(chain_dp(g, eps), chain_dp(g, eps, python=True))


@pytest.mark.parametrize("m,d,w", [(16, 8, 8), (12, 4, 6)])
def test_bound_command_math_is_realized_by_chain_witness(m, d, w):
    code = greedy_code(m, d, w)
    value, _, rank = code_bound(code)
    cert = certify(build_witness(code, "greedy", chains=True), eps_list=())
    assert cert.bound["0.5"] == pytest.approx(value)
    assert cert.certified_rank["0.5"] == rank


@pytest.mark.parametrize("head", ["softmax", "onehot"])
def test_exact_heads_obey_the_domination_inequalities(head):
    m = 12
    fam = build_witness(hadamard_code(m, complements=True), "hadamard", chains=True)
    beta = 3.0
    model = Softmax(beta=beta, m=m) if head == "softmax" else OneHot(beta=beta, m=m)
    y = model.evaluate(fam.tokens)[:, 0]
    eps_head = float(np.abs(y - fam.targets).max())
    assert eps_head < 0.5  # the head is exact on the family
    g = build_graph(fam)
    tokens = {}
    for row in fam.tokens:
        for t in row:
            tokens.setdefault(t.tobytes(), t)
    ids = sorted(tokens)  # build_graph numbers tokens in sorted byte order
    table = np.array([tokens[k] for k in ids], dtype=np.float64)
    alpha = model.kernel(table, table)  # alpha[x, u]
    checked = 0
    for s, d, gap in zip(g.edge_src, g.edge_dst, g.edge_gap, strict=True):
        x = g.node_query[s]
        Du = alpha[x, x] + 2 * alpha[x, g.node_token[s]]
        Dv = alpha[x, x] + 2 * alpha[x, g.node_token[d]]
        assert Dv < rho(int(gap), eps_head) * Du
        checked += 1
    assert checked > 0
    # the normalized kernel matrix on the chosen pairs respects the certified bounds
    P = pair_matrix(g, chain_dp(g, eps_head))
    keep = choose_pairs(P)
    rows, cols = g.node_query[g.diag][keep], g.node_token[g.diag][keep]
    M = alpha[np.ix_(rows, cols)] / alpha[rows, cols][:, None]
    off = ~np.eye(len(keep), dtype=bool)
    assert (M[off] < P[np.ix_(keep, keep)][off]).all()
    n = len(keep)
    assert np.linalg.matrix_rank(M) >= n * n / (n + (P[np.ix_(keep, keep)][off] ** 2).sum())


def test_family_file_roundtrip_and_validation(tmp_path):
    fam = tiny()
    path = save_family(fam, tmp_path / "f.npz")
    back = load_family(path)
    assert back.sha256() == fam.sha256() and back.position == 1
    bad = dict(
        tokens=fam.tokens, position=np.int64(1), targets=fam.targets + 1, meta=np.array("{}")
    )
    cases = {
        "targets do not match": bad,
        "missing arrays": {"tokens": fam.tokens},
        "shape (F, 3, m)": {**bad, "tokens": fam.tokens[:, :2], "targets": fam.targets},
        "only 0 and 1": {**bad, "tokens": fam.tokens * 2, "targets": fam.targets},
        "position must be": {**bad, "position": np.int64(7), "targets": fam.targets},
    }
    for needle, arrays in cases.items():
        p = tmp_path / "bad.npz"
        np.savez(p, **arrays)
        with pytest.raises(FamilyError, match=re.escape(needle)):
            load_family(p)
    junk = tmp_path / "junk.npz"
    junk.write_text("not a zip")
    with pytest.raises(FamilyError, match="not a family file"):
        load_family(junk)
    res = CliRunner().invoke(main, ["certify", str(junk)])
    assert res.exit_code == 2 and res.output.startswith("error:") and "Traceback" not in res.output


def test_cli_witness_certify_bound(tmp_path):
    run = CliRunner().invoke
    fam, wj, cj, bj = (tmp_path / n for n in ("w.npz", "w.json", "c.json", "b.json"))
    res = run(main, ["witness", "--out", str(fam), "--json", str(wj)])
    assert res.exit_code == 0, res.output
    assert json.loads(wj.read_text())["certified_rank"]["0.5"] >= 8
    assert "1,272" in res.output
    res = run(main, ["certify", str(fam), "--eps", "0.2", "--json", str(cj)])
    assert res.exit_code == 0, res.output
    data = json.loads(cj.read_text())
    assert set(data) >= {"inputs", "m", "pairs", "certified_rank", "family_sha256"}
    assert set(data["certified_rank"]) == {"0.5", "0.2"} and data["inputs"] == 408
    res = run(main, ["bound", "--m", "10", "--to", "12", "--json", str(bj)])
    assert res.exit_code == 0, res.output
    rows = json.loads(bj.read_text())["rows"]
    assert [r["m"] for r in rows] == [10, 11, 12] and rows[2]["exact_rank"] == 4096
    res = run(main, ["bound", "--m", "3", "--to", "4", "--json", str(bj)])
    assert res.exit_code == 0, res.output
    for row in json.loads(bj.read_text())["rows"]:  # bisected over all 2^(3m) inputs
        assert 0 < row["exact_softmax_threshold"] <= row["softmax_sufficient"]
    res = run(main, ["codes", "--m", "24", "--kind", "golay-octads"])
    assert res.exit_code == 0 and "759" in res.output


@pytest.mark.parametrize(
    "args, needle",
    [
        (["certify", "x.npz", "--eps", "0.7"], "eps must be in (0, 1/2)"),
        (["certify", "/no/such.npz"], "does not exist"),
        (["bound", "--m", "1"], "need 2 <= --m"),
        (["codes", "--m", "16", "--kind", "hadamard"], "order - 1 must be a prime power"),
        (["witness", "--m", "20", "--code", "golay-octads", "--out", "w.npz"], "only at m = 24"),
        (["codes", "--m", "70", "--kind", "greedy"], "m <= 63"),
    ],
)
def test_certify_commands_bad_input(args, needle):
    res = CliRunner().invoke(main, args)
    assert_error_line(res, needle)


def test_strict_case_certifies_one_more_on_three_disjoint_blocks():
    # m = 9, three disjoint weight-3 blocks: every |c' \ c| = 3, P = rho(3) = 1/2,
    # value = 9 / (3 + 6/4) = 2 exactly; error < 1/2 makes the lemma strict: r > 2
    code = np.zeros((3, 9), dtype=np.uint8)
    for i in range(3):
        code[i, 3 * i : 3 * i + 3] = 1
    cert = certify(build_witness(code, "blocks"), eps_list=(0.25,))
    assert cert.bound["0.5"] == pytest.approx(2.0)
    assert cert.certified_rank["0.5"] == 3
    # error <= eps is not strict: ceil(9 / (3 + 6 * 0.04)) = ceil(2.78) = 3
    assert cert.certified_rank["0.25"] == math.ceil(9 / 3.24)
    value, pairs, rank = code_bound(code)
    assert (pairs, rank) == (3, 3) and value == pytest.approx(2.0)


def test_certified_rank_rounding():
    from sketchsim.certify.certificate import certified_rank

    half = np.full((2, 2), 0.5)  # value 4 / (2 + 0.5) = 1.6
    assert certified_rank(half, strict=True) == 2 and certified_rank(half, strict=False) == 2
    ones = np.full((2, 2), 1.0)  # value 4 / 4 = 1: strictly above 1 -> 2
    assert certified_rank(ones, strict=True) == 2 and certified_rank(ones, strict=False) == 1
    assert certified_rank(np.zeros((1, 1)), strict=True) == 1  # no off-diagonal: not strict
    assert certified_rank(np.zeros((0, 0)), strict=True) == 0
    # entries that are not reciprocals of integers near an integer value: conservative ceil
    odd = np.full((2, 2), math.sqrt(2.0) / 2)  # 4 / (2 + 1) = 1.333..: far from integers
    assert certified_rank(odd, strict=True) == 2


@pytest.mark.parametrize("seed", range(4))
def test_choose_pairs_matches_naive(seed):
    import naive

    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 30))
    P = rng.choice(
        [0.05, 0.1, 0.2, 0.5, 1.0, np.inf], size=(n, n), p=[0.2, 0.2, 0.2, 0.2, 0.1, 0.1]
    )
    np.fill_diagonal(P, 0.0)
    np.testing.assert_array_equal(choose_pairs(P), naive.choose_pairs(P))


def test_choose_pairs_edge_cases():
    import naive

    for P in (np.zeros((0, 0)), np.zeros((1, 1)), np.full((3, 3), np.inf), np.full((4, 4), 0.2)):
        np.fill_diagonal(P, 0.0)
        np.testing.assert_array_equal(choose_pairs(P), naive.choose_pairs(P))


@pytest.mark.parametrize("m,d,w,eps", [(12, 4, 6, 0.5), (10, 4, 5, 0.3), (9, 6, 3, 0.5)])
def test_chain_dp_matches_bellman_ford(m, d, w, eps):
    import naive

    from sketchsim.certify.certificate import _chain_dp
    from sketchsim.certify.chains import log_rho

    fam = build_witness(greedy_code(m, d, w), "greedy", chains=True, seed=2)
    g = build_graph(fam)
    edge_w = np.array([log_rho(int(x), eps) for x in g.edge_gap])
    want = naive.chain_dp(len(g.node_query), g.edge_src, g.edge_dst, edge_w, g.diag)
    got = _chain_dp(len(g.node_query), g.edge_src, g.edge_dst, edge_w, g.diag)
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert np.isfinite(got).sum() > len(g.diag)  # some chains were found


@pytest.mark.slow
def test_code_bound_grows_with_linear_distance_codes():
    from sketchsim.certify.bounds import best_bound, fit_growth

    rows = [best_bound(m) for m in (16, 24, 32)]
    ranks = [r.certified_rank for r in rows]
    assert ranks[0] < ranks[1] < ranks[2]
    assert fit_growth([16, 24, 32], ranks)["slope"] > 0.1
    assert fit_growth([4], [1])["slope"] is None


def test_exact_softmax_threshold_brackets_the_closed_form():
    from sketchsim.certify.softmax import closed_form_threshold, exact_softmax_threshold
    from sketchsim.heads.exhaustive import verify

    for m in (1, 2, 3):
        res = exact_softmax_threshold(m, tol=1e-3)
        assert res.fails < closed_form_threshold(m) <= res.exact
        assert res.exact - res.fails <= 1e-3 and res.sufficient == pytest.approx(math.log(4))
    # independent: just below ln(6)/2 fails, just above is exact (issue 12 numbers)
    assert verify(3, 3, "softmax", beta=0.8958).exact_fraction < 1
    assert verify(3, 3, "softmax", beta=0.8960).exact_fraction == 1


def _graph_fields(g):
    return (
        g.node_query,
        g.node_token,
        g.node_overlap,
        g.edge_src,
        g.edge_dst,
        g.edge_gap,
        g.diag,
        g.base,
    )


def random_family(m, n_inputs, seed, position=1):
    rng = np.random.default_rng(seed)
    pool = rng.integers(0, 2, size=(max(3, n_inputs // 4), m), dtype=np.uint8)
    pool[0] = 0
    pool[1] = 1  # all zeros and all ones among the tokens
    pick = rng.integers(0, len(pool), size=(n_inputs, 3))
    pick[: n_inputs // 3, 2] = pick[: n_inputs // 3, 1]  # self inputs (x, u, u)
    tokens = pool[pick]
    return WitnessFamily(tokens, position, minip_targets(tokens)[:, position - 1], {})


@pytest.mark.parametrize("m", [1, 5, 24, 63, 64, 65, 128])
@pytest.mark.parametrize("positional", [True, False])
def test_build_graph_matches_naive(m, positional):
    import naive

    for seed, position in ((0, 1), (1, 3)):
        fam = random_family(m, 600, seed + m, position)
        got = _graph_fields(build_graph(fam, positional))
        want = naive.build_graph(fam, positional)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_array_equal(g, w)
    code = greedy_code(min(m, 12), 4, min(m, 12) // 2, limit=12)
    fam = build_witness(code, "g", chains=True) if m > 4 else tiny()
    for g, w in zip(_graph_fields(build_graph(fam)), naive.build_graph(fam), strict=True):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize(
    "position, needle",
    [
        (np.float64("nan"), "position must be the integer 1, 2 or 3"),
        (np.float64("inf"), "position must be the integer 1, 2 or 3"),
        (np.array("abc"), "position must be the integer 1, 2 or 3"),
        (np.float64(1.5), "position must be the integer 1, 2 or 3"),
        (np.float64(1.0), "position must be the integer 1, 2 or 3"),
    ],
)
def test_malformed_family_files_are_one_line(tmp_path, position, needle):
    fam = tiny()
    p = tmp_path / "bad.npz"
    np.savez(p, tokens=fam.tokens, position=position, targets=fam.targets, meta=np.array("{}"))
    with pytest.raises(FamilyError, match=re.escape(needle)):
        load_family(p)
    assert_error_line(CliRunner().invoke(main, ["certify", str(p)]), needle)


def test_empty_family_is_an_error(tmp_path):
    p = tmp_path / "empty.npz"
    empty = np.zeros((0, 3, 6), dtype=np.uint8)
    np.savez(p, tokens=empty, position=np.int64(1), targets=np.zeros(0, int), meta=np.array("{}"))
    assert_error_line(CliRunner().invoke(main, ["certify", str(p)]), "has no inputs")


@pytest.mark.parametrize(
    "args, needle",
    [
        (["codes", "--m", "63", "--kind", "greedy", "--w", "31", "--d", "40"], "over the limit"),
        (["codes", "--m", "10008", "--kind", "hadamard"], "exceeds the limit 4,096"),
        (["witness", "--code", "golay-dodecads", "--codewords", "0", "--out", "w.npz"], "limit"),
        (["bound", "--m", "2", "--to", "65"], "--to <= 64"),
        (["bound", "--m", "8", "--step", "0"], "--step must be >= 1"),
    ],
)
def test_sizes_refused_before_allocating(args, needle, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert_error_line(CliRunner().invoke(main, args), needle)
    assert not (tmp_path / "w.npz").exists()


def test_greedy_code_stats_do_not_allocate_all_pairs():
    from sketchsim.certify.codes import STATS_MAX_WORDS

    res = CliRunner().invoke(main, ["codes", "--kind", "greedy", "--m", "24", "--d", "2"])
    assert res.exit_code == 0 and "not computed" in res.output
    assert STATS_MAX_WORDS < 65536


@pytest.mark.parametrize("seed", range(3))
def test_sparse_pair_choice_matches_dense(seed, monkeypatch):
    """The sparse path's greedy choice is the dense greedy choice (exact choice off)."""
    from sketchsim.certify import certificate as cm
    from sketchsim.certify import subsets

    monkeypatch.setattr(subsets, "OPTIMAL_MAX_PAIRS", 0)

    fams = [
        build_witness(greedy_code(12, 4, 6, limit=40), "g", chains=True, seed=seed),
        random_family(8, 3000, seed),
        build_witness(hadamard_code(12, complements=True), "h", 15, seed=seed),
    ]
    for fam in fams:
        dense = certify(fam, eps_list=(0.1, 0.4))
        monkeypatch.setattr(cm, "DENSE_MAX_PAIRS", 0)
        sparse = certify(fam, eps_list=(0.1, 0.4))
        monkeypatch.setattr(cm, "DENSE_MAX_PAIRS", 4096)
        assert sparse.to_dict() == dense.to_dict()
        g = build_graph(fam)
        dist = chain_dp(g, 0.5)
        P = pair_matrix(g, dist)
        rows, cols, vals = cm.bounded_entries(g, dist)
        want = np.argwhere(np.isfinite(P) & ~np.eye(len(P), dtype=bool))
        got = np.stack([rows, cols], 1)
        assert sorted(map(tuple, got)) == sorted(map(tuple, want))
        np.testing.assert_array_equal(P[rows, cols], vals)


def test_twenty_thousand_query_family_certifies():
    # 20,000 queries, each with its own two candidates at a gap of 3 and no candidate
    # shared with another query: every off-diagonal entry is unbounded, so only one
    # pair survives (r >= 1); the dense pair matrix would need 20,000^2 doubles (3.2 GB)
    rng = np.random.default_rng(0)
    m = 24
    n = 20000
    words = np.unique(rng.integers(0, 2, size=(3 * n, m), dtype=np.uint8), axis=0)[:n]
    x = 1 - words
    other = words.copy()
    for i in range(n):  # flip three zeros of the word into ones: overlap with x is 3
        zeros = np.flatnonzero(words[i] == 0)[:3]
        other[i, zeros] = 1
    triples = np.stack([x, words, words], 1)
    triples = np.concatenate(
        [
            triples,
            np.stack([x, other, other], 1),
            np.stack([x, words, other], 1),
            np.stack([x, other, words], 1),
        ]
    )
    fam = WitnessFamily(triples, 1, minip_targets(triples)[:, 0], {})
    cert = certify(fam, eps_list=())
    assert cert.queries == n and cert.pairs["0.5"] == 1 and cert.certified_rank["0.5"] == 1


def test_json_never_overwrites_an_input(tmp_path):
    fam = save_family(tiny(), tmp_path / "w.npz")
    before = fam.read_bytes()
    res = CliRunner().invoke(main, ["certify", str(fam), "--json", str(fam)])
    assert_error_line(res, "would overwrite the input")
    assert fam.read_bytes() == before
    x = tmp_path / "x.npz"
    res = CliRunner().invoke(main, ["witness", "--out", str(x), "--json", str(x)])
    assert_error_line(res, "name the same file")
    assert not x.exists()
