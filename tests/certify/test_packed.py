"""Packed witness families: the same family as build_witness, the same certificate as certify."""

import numpy as np
import pytest

from sketchsim.certify import WitnessFamily, build_witness, certify, load_family
from sketchsim.certify import certificate as cert_mod
from sketchsim.certify.codes import greedy_code, hadamard_code, make_code
from sketchsim.certify.packed import (
    is_packed_file,
    load_any_family,
    load_packed_family,
    pack_family,
    save_packed_family,
    unpack_keys,
)
from sketchsim.certify.packed_certify import certify_packed
from sketchsim.certify.packed_witness import build_packed_witness, subset_words, witness_input_count
from sketchsim.errors import FamilyError
from sketchsim.minip.kernel import minip_targets


def random_family(m, n_inputs, seed, position=1):
    rng = np.random.default_rng(seed)
    pool = rng.integers(0, 2, size=(max(3, n_inputs // 4), m), dtype=np.uint8)
    pick = rng.integers(0, len(pool), size=(n_inputs, 3))
    pick[: n_inputs // 3, [i for i in range(3) if i != position - 1][1]] = pick[
        : n_inputs // 3, [i for i in range(3) if i != position - 1][0]
    ]  # self inputs (x, u, u)
    tokens = pool[pick]
    return WitnessFamily(tokens, position, minip_targets(tokens)[:, position - 1], {})


def test_single_step_gaps_give_build_witness_exactly():
    # hadamard(12) with complements: gaps 3 and 6, each one chain step, so no
    # random intermediate tokens: the packed family is build_witness's, input for input
    code = hadamard_code(12, complements=True)
    fam = build_witness(code, "h", chains=True)
    packed = build_packed_witness(code, "h", chains=True)
    assert np.array_equal(packed.tokens(), fam.tokens)
    assert packed.sha256() == fam.sha256()
    assert np.array_equal(packed.targets(), fam.targets)


@pytest.mark.parametrize("both_orders", [True, False])
def test_chained_family_has_build_witness_shape_and_certificate(both_orders):
    code = greedy_code(16, 8, 8)  # gaps 4 and 8 = 4 + 4: one intermediate per long gap
    fam = build_witness(code, "g", chains=True, both_orders=both_orders)
    packed = build_packed_witness(code, "g", chains=True, both_orders=both_orders)
    assert packed.inputs == len(fam.tokens) == witness_input_count(code, True, both_orders)
    a = certify(fam).to_dict()
    b = certify_packed(packed).to_dict()
    assert a.pop("family_sha256") != b.pop("family_sha256")  # other chain tokens
    assert a == b
    # every query is the complement of a codeword
    queries = {row.tobytes() for row in 1 - code}
    assert {t.tobytes() for t in packed.tokens()[:, 0]} == queries


def test_subset_words_are_build_witness_words():
    code = hadamard_code(20, complements=True)
    fam = build_witness(code, "h", codewords=7, seed=3)
    words = subset_words(code, 7, 3)
    assert {t.tobytes() for t in fam.tokens[:, 0]} == {t.tobytes() for t in 1 - words}


@pytest.mark.parametrize("positional", [True, False])
@pytest.mark.parametrize("block", [1, 40, 1 << 20])
def test_certify_packed_equals_certify(positional, block):
    fams = [
        build_witness(greedy_code(12, 4, 6, limit=40), "g", chains=True, seed=1),
        build_witness(hadamard_code(12, complements=True), "h", 15, chains=True),
        random_family(8, 3000, 0),
        random_family(6, 500, 1, position=2),
        random_family(5, 400, 2, position=3),
    ]
    for fam in fams:
        want = certify(fam, eps_list=(0.1, 0.4), positional=positional).to_dict()
        got = certify_packed(
            pack_family(fam), eps_list=(0.1, 0.4), positional=positional, block_inputs=block
        )
        assert got.to_dict() == want


def test_certify_packed_sparse_path_equals_certify(monkeypatch):
    fam = random_family(8, 3000, 4)
    monkeypatch.setattr(cert_mod, "DENSE_MAX_PAIRS", 0)
    want = certify(fam, eps_list=(0.25,)).to_dict()
    got = certify_packed(pack_family(fam), eps_list=(0.25,), block_inputs=100).to_dict()
    assert got == want and got["subset"]["0.5"] == "greedy"


def test_packed_file_round_trip(tmp_path):
    packed = build_packed_witness(greedy_code(16, 8, 8), "g")
    path = save_packed_family(packed, tmp_path / "p.npz")
    assert is_packed_file(path)
    back = load_packed_family(path)
    assert np.array_equal(back.keys, packed.keys) and back.meta == packed.meta
    assert back.m == 16 and back.position == 1
    assert isinstance(load_any_family(path), type(packed))
    with pytest.raises(FamilyError, match="packed family file"):
        load_family(path)


def test_token_files_are_not_packed(tmp_path):
    from sketchsim.certify import save_family

    fam = build_witness(hadamard_code(12), "h", codewords=4)
    path = save_family(fam, tmp_path / "t.npz")
    assert not is_packed_file(path)
    assert np.array_equal(load_any_family(path).tokens, fam.tokens)


@pytest.mark.parametrize(
    "change, needle",
    [
        ({"targets": np.zeros(1, np.uint8)}, "targets do not match"),
        ({"keys": np.full((1, 3), 1 << 20, np.uint64)}, "bits beyond"),
        ({"keys": np.zeros((1, 3), np.int64)}, "unsigned"),
        ({"m": np.float64(8)}, "m must be an integer"),
        ({"position": np.int64(4)}, "position 1-3"),
        ({"meta": np.array("[1]")}, "JSON object"),
    ],
)
def test_malformed_packed_files_are_refused(tmp_path, change, needle):
    arrays = {
        "keys": np.array([[0b111, 0b1, 0b1]], np.uint32),
        "m": np.int64(8),
        "position": np.int64(1),
        "targets": np.ones(1, np.uint8),
        "meta": np.array("{}"),
    }
    arrays.update(change)
    path = tmp_path / "bad.npz"
    np.savez(path, **arrays)
    with pytest.raises(FamilyError, match=needle):
        load_packed_family(path)


def test_unpack_inverts_pack():
    rng = np.random.default_rng(0)
    for m in (1, 7, 32, 64):
        tokens = rng.integers(0, 2, size=(50, 3, m), dtype=np.uint8)
        fam = WitnessFamily(tokens, 1, minip_targets(tokens)[:, 0], {})
        packed = pack_family(fam)
        assert np.array_equal(unpack_keys(packed.keys, m), tokens)
        assert np.array_equal(packed.targets(), fam.targets)


def test_random_code_keeps_more_than_1024_words_when_asked():
    code = make_code("random", 24, d=4, w=12, limit=1500)
    assert len(code) == 1500
    assert len(make_code("random", 24, d=4, w=12)) == 1024  # the default is unchanged


def test_packed_builder_refuses_repeated_words():
    code = hadamard_code(12)
    with pytest.raises(FamilyError, match="repeated"):
        build_packed_witness(np.vstack([code, code[:1]]))


def test_gap_rows_in_chunks_change_nothing(monkeypatch):
    from sketchsim.certify import packed_witness as packed_mod

    code = greedy_code(16, 8, 8)
    whole = build_packed_witness(code, "g", seed=2)
    monkeypatch.setattr(packed_mod, "GAP_ROWS", 7)
    assert witness_input_count(code, True) == len(build_witness(code, "g", chains=True).tokens)
    assert np.array_equal(build_packed_witness(code, "g", seed=2).keys, whole.keys)


def test_packed_size_is_refused_before_building(monkeypatch):
    from sketchsim.certify import packed_witness as packed_mod

    monkeypatch.setattr(packed_mod, "PACKED_MAX_INPUTS", 100)
    with pytest.raises(FamilyError, match="over the limit 100") as info:
        build_packed_witness(greedy_code(16, 8, 8))
    assert info.value.param == "codewords"
