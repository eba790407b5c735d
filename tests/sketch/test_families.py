"""Family plug-ins: declared bounds checked by enumeration, MQAR, specs, support checks."""

import itertools
import math
import tracemalloc

import numpy as np
import pytest
from click.testing import CliRunner
from cliutil import assert_error_line
from fake_entry_points import FakeEntryPoint

from sketchsim.cli import main
from sketchsim.errors import FamilyError, PluginError
from sketchsim.sketch.family import HardFamily
from sketchsim.sketch.family_plugins import discover_families, resolve_family
from sketchsim.sketch.grouping import entropy_bits, group_transcripts
from sketchsim.sketch.measure import InputLimitError, measure, plan_inputs
from sketchsim.sketch.mqar import MQARFamily
from sketchsim.sketch.plugins import resolve_spec


def run(*args):
    return CliRunner().invoke(main, list(args))


def enumerated_answer_entropy(fam):
    """Entropy (bits) of the answer vector over every input of the family, each equally
    likely, with the answers computed from the tokens by the family's definition."""
    T = fam.all_answers()
    tokens = fam.tokens(T)
    answers = fam.reference_answers(tokens)
    np.testing.assert_array_equal(answers, T)  # the tokens encode the declared answers
    # the premise of THEORY section 5: query tokens are the same in every input
    assert (tokens[:, : fam.q] == tokens[:1, : fam.q]).all()
    fp = np.zeros((T.shape[0], 2), dtype=np.uint64)
    for i in range(fam.q):
        fp[:, 0] = fp[:, 0] * np.uint64(fam.s + 1) + answers[:, i].astype(np.uint64)
    _, counts = group_transcripts(fp)
    return entropy_bits(counts)


@pytest.mark.parametrize("q,s", [(1, 1), (2, 3), (3, 2), (4, 1), (2, 7)])
def test_hard_bound_by_enumeration(q, s):
    fam = HardFamily(q, s, seed=q + s)
    assert math.isclose(enumerated_answer_entropy(fam), fam.bound_bits, abs_tol=1e-9)
    assert math.isclose(fam.bound_bits, q * math.log2(s + 1))


@pytest.mark.parametrize(
    "q,s,keys,pairs,shuffle",
    [
        (1, 1, 0, 0, True),
        (2, 3, 0, 0, True),
        (3, 2, 8, 5, True),
        (2, 4, 6, 6, False),
        (4, 1, 0, 0, False),
        (4, 1, 0, 8, True),  # pairs = 2q, as docs/capacity.md's causal rows
        (3, 3, 0, 6, True),
    ],
)
def test_mqar_bound_by_enumeration(q, s, keys, pairs, shuffle):
    fam = MQARFamily(q, s, seed=7, keys=keys, pairs=pairs, shuffle=shuffle)
    assert math.isclose(enumerated_answer_entropy(fam), q * math.log2(s + 1), abs_tol=1e-9)
    assert math.isclose(fam.bound_bits, q * math.log2(s + 1))
    tokens = fam.tokens(fam.all_answers())
    data_keys = tokens[:, fam.q :, 0] & np.uint64((1 << fam.key_bits) - 1)
    for row in data_keys:  # keys are distinct within an input, as in zoology
        assert len(set(row.tolist())) == fam.pairs
    assert (data_keys < fam.keys).all()


def test_mqar_order_and_distractors_vary_with_the_input():
    fam = MQARFamily(3, 7, seed=1, keys=16, pairs=6)
    tokens = fam.tokens(fam.sample_answers(200))
    key_mask = np.uint64((1 << fam.key_bits) - 1)
    orders = {tuple((tokens[b, 3:, 0] & key_mask).tolist()) for b in range(200)}
    assert len(orders) > 50
    again = fam.tokens(fam.sample_answers(200))
    np.testing.assert_array_equal(tokens, again)  # seeded, deterministic


def test_all_answers_is_mixed_radix_product():
    fam = HardFamily(3, 2)
    expected = np.array(list(itertools.product(range(3), repeat=3)))
    np.testing.assert_array_equal(fam.all_answers(), expected)
    assert fam.all_answers().dtype == np.uint8
    assert HardFamily(2, 300).all_answers().dtype == np.uint16


def test_all_answers_has_no_int64_table():
    fam = HardFamily(20, 1)  # 2^20 inputs x 20 answers
    tracemalloc.start()
    T = fam.all_answers()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert T.shape == (1 << 20, 20)
    # one uint8 table (20 MiB) plus index and column temporaries, not B*q*8 bytes (160 MiB)
    assert peak < 48 * 2**20, peak


@pytest.mark.slow
def test_kv_sum_correct_and_drop_below_bound():
    fam = MQARFamily(3, 3, seed=2)
    T = fam.all_answers()
    proto, params, _ = resolve_spec("kv-sum")
    rep = measure(fam, T, proto, params)
    assert rep.correct_fraction == 1.0 and rep.meets_bound
    assert math.isclose(rep.declared_bits, fam.bound_bits)
    assert rep.entry_entropy_bits >= rep.entropy_bits - 1e-9 >= fam.bound_bits - 2e-9
    proto, params, _ = resolve_spec("kv-sum:drop=1")
    rep = measure(fam, T, proto, params)
    assert not rep.meets_bound and rep.collision is not None
    assert rep.entry_entropy_below_bound


@pytest.mark.slow
def test_kv_sum_with_distractors_is_correct():
    fam = MQARFamily(2, 3, seed=4, keys=10, pairs=5)
    proto, params, _ = resolve_spec("kv-sum")
    rep = measure(fam, fam.all_answers(), proto, params)
    assert rep.correct_fraction == 1.0
    assert rep.declared_bits > fam.bound_bits  # registers for distractor keys too


def test_protocol_family_mismatch_names_both():
    proto, params, _ = resolve_spec("kernel")
    with pytest.raises(PluginError, match="kernel does not support family mqar"):
        measure(MQARFamily(2, 3), MQARFamily(2, 3).all_answers(), proto, params)
    proto, params, _ = resolve_spec("kv-sum")
    with pytest.raises(PluginError, match="kv-sum does not support family hard"):
        measure(HardFamily(2, 3), HardFamily(2, 3).all_answers(), proto, params)


FAMILY_FILE = """
from sketchsim.sketch.family import FamilyType, HardFamily

def build(q, s, seed, params):
    return HardFamily(q, s, seed + params["shift"])

MINE = FamilyType("mine", "F(q,s) with a shifted seed", build,
                  params=(__import__("sketchsim.sketch", fromlist=["Param"]).Param(
                      "shift", "int", 0, "added to the seed"),))
"""


def test_family_specs(tmp_path):
    path = tmp_path / "myfam.py"
    path.write_text(FAMILY_FILE)
    ftype, params, source = resolve_family(f"{path}:MINE:shift=3")
    assert ftype.name == "mine" and params == {"shift": 3} and source.startswith("file")
    fam = ftype.make(2, 3, 1, params)
    assert fam.seed == 4
    ftype, params, _ = resolve_family("mqar:keys=9,pairs=4")
    assert params == {"keys": 9, "pairs": 4, "shuffle": True}
    fam = ftype.make(3, 3, 0, params)
    assert fam.keys == 9 and fam.n_tokens == 7
    ftype, _, source = resolve_family("sketchsim.sketch.mqar:MQAR")
    assert ftype.name == "mqar" and source == "module sketchsim.sketch.mqar"
    for bad, needle in [
        ("nope", "unknown family 'nope'"),
        ("mqar:colour=3", "family mqar has no parameter 'colour'"),
        ("mqar:keys=x", "family mqar: parameter keys expects int"),
        (f"{path}:OTHER", "defines no family 'OTHER'"),
        ("mqar:pairs=1", None),
    ]:
        with pytest.raises(FamilyError) as err:
            ftype, params, _ = resolve_family(bad)
            ftype.make(3, 3, 0, params)
        if needle:
            assert needle in str(err.value)
    assert {f.name for f in discover_families()} >= {"hard", "mqar"}


def test_memory_and_exhaustive_limits_before_allocating():
    with pytest.raises(InputLimitError, match="memory limit") as err:
        plan_inputs(HardFamily(2000, 7), False, 60_000_000)
    assert err.value.kind == "memory" and err.value.estimate > 100 * 2**30
    with pytest.raises(InputLimitError, match="above the limit 2\\^24"):
        plan_inputs(HardFamily(400, 7), True, 10)
    assert plan_inputs(HardFamily(24, 1), True, 10) == ("exhaustive", 1 << 24)


def test_cli_families_and_mqar_transcript():
    res = run("families")
    assert res.exit_code == 0 and "mqar" in res.output and "hard" in res.output
    res = run("transcript", "--family", "mqar:pairs=4,keys=6", "--q", "3", "--s", "3", "--quiet")
    assert res.exit_code == 0, res.output
    assert "kv-sum" in res.output and "cannot be correct" in res.output
    res = run("transcript", "--family", "mqar", "--q", "3", "--s", "3", "--protocol", "kernel")
    assert_error_line(res, "protocol kernel does not support family mqar")
    res = run("transcript", "--family", "nope", "--q", "3")
    assert_error_line(res, "unknown family 'nope'")


def test_entry_points_are_listed_and_failures_do_not_stop_discovery(monkeypatch):
    import sketchsim.sketch.family_plugins as families
    from sketchsim.sketch import specs
    from sketchsim.sketch.family import HARD, FamilyType

    other = FamilyType("other", "an installed family", HARD.build)
    clash = FamilyType("hard", "reuses a built-in name", HARD.build)
    eps = [
        FakeEntryPoint("other", "pkg.mod:OTHER", other),
        FakeEntryPoint("bye", "pkg.bye:X", exc=SystemExit(3)),
        FakeEntryPoint("clash", "pkg.clash:X", clash),
        FakeEntryPoint("junk", "pkg.junk:X", 42),
    ]
    monkeypatch.setattr(specs, "entry_points", lambda group: eps)
    found = {(f.name, f.source): f for f in families.discover_families()}
    assert found["other", "entry point pkg.mod:OTHER"].family is other
    assert "SystemExit" in found["bye", "entry point pkg.bye:X"].error
    assert "already taken by built-in" in found["hard", "entry point pkg.clash:X"].error
    assert "not a sketchsim FamilyType" in found["junk", "entry point pkg.junk:X"].error
    ftype, _, source = families.resolve_family("other")
    assert ftype is other and source == "entry point pkg.mod:OTHER"
    assert families.resolve_family("hard")[0] is HARD  # the built-in wins
    res = run("families")
    assert res.exit_code == 0 and "other" in res.output and "SystemExit" in res.output
