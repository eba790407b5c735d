import json
import math
import re

import numpy as np
import pytest
from click.testing import CliRunner
from cliutil import assert_error_line

from sketchsim.attention import OneHot, Softmax
from sketchsim.certify import Family, build_witness, certify, load_family, rho, save_family
from sketchsim.certify.bounds import code_bound
from sketchsim.certify.certificate import build_graph, chain_dp, choose_pairs, pair_matrix
from sketchsim.certify.chains import best_chain_product, best_steps
from sketchsim.cli import main
from sketchsim.codes import greedy_code, hadamard_code
from sketchsim.errors import FamilyError
from sketchsim.minip import minip_targets


def family_from(triples, position=1):
    tokens = np.array(triples, dtype=np.uint8)
    return Family(tokens, position, minip_targets(tokens)[:, position - 1], {})


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
    value, _ = code_bound(code)
    cert = certify(build_witness(code, "greedy", chains=True), eps_list=())
    assert cert.bound["0.5"] == pytest.approx(value)


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
