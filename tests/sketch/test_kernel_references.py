"""Small jitted kernels of sketchsim.sketch against plain NumPy / Python references.

Random and edge inputs: token widths m = 63, 64, 65, 128 (and blocks straddling
words), all-zero and all-one tokens, int64 and uint64 extremes.
"""

import naive
import numpy as np
import pytest

from sketchsim.minip.bits import pack_bits
from sketchsim.sketch import block_counts
from sketchsim.sketch.engine import Engine
from sketchsim.sketch.entry_tally import _count_dense
from sketchsim.sketch.estimators import match_answers
from sketchsim.sketch.family import HardFamily
from sketchsim.sketch.fingerprint import fold, fold_py
from sketchsim.sketch.kernel_head import _T, _word_below, head_dims, kernel_plan
from sketchsim.sketch.mqar import MQARFamily
from sketchsim.sketch.plugins import resolve_spec

# (q, s) with token width m = (q + 1) s + 1 of 3, 63, 64, 65, 128 and 145 (blocks of 18
# bits straddle the 64-bit words)
SIZES = [(1, 1), (1, 31), (6, 9), (3, 16), (126, 1), (7, 18)]


def family_tokens_reference(fam, T):
    """F(q, s) as 0/1 bytes (B, q + 1, m): query ``i`` is block ``i`` and the last ``s + 1``
    elements; the data token has ``T[b, i]`` ones at ``perm[i, :T[b, i]]``."""
    q, s, m = fam.q, fam.s, fam.m
    query = np.zeros((q, m), dtype=np.uint8)
    for i in range(q):
        query[i, i * s : (i + 1) * s] = 1
        query[i, q * s :] = 1
    X = np.zeros((T.shape[0], q + 1, m), dtype=np.uint8)
    X[:, :q] = query
    X[:, q] = naive.hard_data_token(T, fam.perm, m)
    return X


def answer_vectors(fam, rng, n=40):
    T = rng.integers(0, fam.s + 1, (n, fam.q))
    return np.vstack([T, np.zeros(fam.q, int), np.full(fam.q, fam.s)])  # all zero, all s


@pytest.mark.parametrize("q,s", [*SIZES, (2, 300)])
def test_hard_family_tokens_match_naive(q, s, monkeypatch):
    import sketchsim.sketch.family as family

    fam = HardFamily(q, s, seed=q + s)
    T = answer_vectors(fam, np.random.default_rng(s))
    want = naive.pack_bits(family_tokens_reference(fam, T))
    np.testing.assert_array_equal(fam.tokens(T), want)  # few inputs: serial
    monkeypatch.setattr(family, "_SERIAL_TOKENS", -1)
    np.testing.assert_array_equal(fam.tokens(T), want)  # _build_tokens
    monkeypatch.undo()
    assert fam._masks is not None  # small families build from prefix-mask tables
    np.testing.assert_array_equal(fam.variable_tokens(T), want[:, q:])  # _build_data_masked
    fam._masks = None  # the bit-by-bit builder that families too large for the tables use
    np.testing.assert_array_equal(fam.variable_tokens(T), want[:, q:])  # _build_data_tokens


def block_counts_reference(X, q, s, levels):
    """Transcript: the data token's (the last) q block counts, each clipped to levels - 1;
    query ``i`` answers slot ``i``."""
    data = X[:, -1, : q * s].reshape(len(X), q, s).sum(axis=2)
    transcripts = np.minimum(data, levels - 1)
    return transcripts, transcripts.copy()


@pytest.mark.parametrize("q,s", SIZES)
def test_block_counts_match_dense_reference(q, s):
    fam = HardFamily(q, s, seed=1)
    ctx = fam.context()
    rng = np.random.default_rng(q * s)
    X = rng.integers(0, 2, (50, q + 1, fam.m), dtype=np.uint8)  # any tokens, not only F(q, s)
    X = np.concatenate([X, np.zeros_like(X[:1]), np.ones_like(X[:1])])
    X = np.concatenate([X, family_tokens_reference(fam, answer_vectors(fam, rng, 10))])
    # both protocols are block_counts_plan: block-counts with s + 1 levels, clipped-counts fewer
    cases = [("block-counts", s + 1), ("clipped-counts", s), ("clipped-counts:levels=2", 2)]
    for spec, levels in cases:
        if levels < 2:
            continue
        proto, params, _ = resolve_spec(spec)
        plan = proto.plan(ctx, params)
        assert plan.emit is block_counts.emit and plan.layers[0].alphabet == plan.aux[0] == levels
        res = Engine(plan, ctx, proto.name).run(pack_bits(X), store=True)
        transcripts, answers = block_counts_reference(X, q, s, levels)
        np.testing.assert_array_equal(res.transcripts, transcripts)
        np.testing.assert_array_equal(res.answers, answers)


def kv_sum_reference(words, q, key_bits, keys, drop, levels):
    """Register ``k``: the sum of ``value >> drop`` over the data tokens (positions ``q..``)
    with key ``k``, saturated at ``levels - 1``; query ``i`` answers its key's register
    ``<< drop``.  A token is one word: the key in its low ``key_bits`` bits, the value above."""
    words = words.astype(np.int64)
    key, value = words & ((1 << key_bits) - 1), words >> key_bits
    registers = np.zeros((len(words), keys), dtype=np.int64)
    for b in range(len(words)):
        for j in range(q, words.shape[1]):
            registers[b, key[b, j]] += value[b, j] >> drop
    registers = np.minimum(registers, levels - 1)
    return registers, np.take_along_axis(registers, key[:, :q], axis=1) << drop


@pytest.mark.parametrize(
    "q,s,keys,pairs,shuffle",
    [(1, 1, 0, 0, True), (3, 3, 8, 5, True), (2, 7, 6, 6, False), (4, 200, 0, 0, True)],
)
@pytest.mark.parametrize("drop", [0, 1, 2])
def test_kv_sum_matches_dense_reference(q, s, keys, pairs, shuffle, drop):
    fam = MQARFamily(q, s, seed=3, keys=keys, pairs=pairs, shuffle=shuffle)
    ctx = fam.context()
    proto, params, _ = resolve_spec(f"kv-sum:drop={drop}")
    plan = proto.plan(ctx, params)
    T = fam.all_answers() if (s + 1) ** q <= 4096 else fam.sample_answers(500)
    T = np.vstack([T, np.zeros(q, T.dtype), np.full(q, s, T.dtype)])  # all zero, all s
    tokens = fam.tokens(T)
    res = Engine(plan, ctx, proto.name).run(tokens, store=True)
    levels = (s >> drop) + 1
    registers, answers = kv_sum_reference(tokens[:, :, 0], q, fam.key_bits, fam.keys, drop, levels)
    np.testing.assert_array_equal(res.transcripts, registers)
    np.testing.assert_array_equal(res.answers, answers)
    if drop == 0:
        np.testing.assert_array_equal(answers, T)  # the reference is the family's answer


@pytest.mark.parametrize("width", [1, 3, 64, 65])
def test_count_dense_matches_a_histogram(width):
    rng = np.random.default_rng(width)
    sizes = rng.integers(1, 6, width)  # values of column c: 0 .. sizes[c] - 1
    for rows in (0, 1, 63, 64, 65, 128):
        tr = (rng.random((rows + 2, width)) * sizes).astype(np.int64)
        tr[rows:] = -5  # rows past `rows` are never read
        cols = rng.permutation(width).astype(np.int64)
        offsets = np.concatenate([[0], np.cumsum(sizes[cols])[:-1]]).astype(np.int64)
        hist = rng.integers(0, 3, int(sizes.sum())).astype(np.int64)
        want = hist.copy()
        for r in range(rows):
            for j, c in enumerate(cols):
                want[offsets[j] + tr[r, c]] += 1
        assert _count_dense(tr, rows, cols, sizes[cols], offsets, hist)
        np.testing.assert_array_equal(hist, want)
        if rows:  # one value out of range anywhere: False and the histogram as it was
            for bad in (-1, -(1 << 63), 10**9):
                r, j = int(rng.integers(0, rows)), int(rng.integers(0, width))
                broken = tr.copy()
                broken[r, cols[j]] = bad if bad != 10**9 else sizes[cols[j]]
                before = hist.copy()
                assert not _count_dense(broken, rows, cols, sizes[cols], offsets, hist)
                np.testing.assert_array_equal(hist, before)


@pytest.mark.parametrize("q", [1, 3, 64, 65])
def test_match_answers_matches_numpy(q):
    rng = np.random.default_rng(q)
    T = rng.integers(0, 3, (200, q)).astype(np.uint8)
    for lo, rows in [(0, 0), (0, 1), (0, 200), (17, 63), (100, 100), (199, 1)]:
        answers = T[lo : lo + rows].astype(np.int64)
        wrong = rng.random(rows) < 0.1
        answers[wrong, rng.integers(0, q, int(wrong.sum()))] += 1
        answers = np.vstack([answers, np.full((3, q), 99)])  # rows past `rows` unread
        correct = np.ones(200, dtype=bool)
        correct[:lo] = False
        first = match_answers(answers, T, lo, rows, correct)
        want = (answers[:rows] == T[lo : lo + rows]).all(axis=1)
        np.testing.assert_array_equal(correct[lo : lo + rows], want)
        assert not correct[:lo].any() and correct[lo + rows :].all()
        assert first == (int(np.flatnonzero(~want)[0]) if (~want).any() else -1)


def test_fold_matches_fold_py():
    rng = np.random.default_rng(0)
    values = [0, 1, -1, 2**63 - 1, -(2**63), *rng.integers(-(2**63), 2**63 - 1, 100).tolist()]
    entries = [0, 1, 63, 64, 65, 2**31, 2**40, *rng.integers(0, 2**20, 20).tolist()]
    lanes = [(0, 0), (2**64 - 1, 2**64 - 1), *rng.integers(0, 2**64 - 1, (5, 2), np.uint64)]
    for h1, h2 in lanes:
        for e in entries:
            for v in values:
                got = fold(np.uint64(h1), np.uint64(h2), e, np.int64(v))
                assert tuple(int(x) for x in got) == fold_py(int(h1), int(h2), e, v)


@pytest.mark.parametrize("d", [1, 2, 7, 63, 64, 65, 128])
@pytest.mark.parametrize("H", [1, 2, 3, 40])
def test_kernel_head_tables_match_head_dims(d, H):
    """The plan's tables: per coordinate its entry, stride and head; per head its start."""
    ctx = HardFamily(d, 1).context()  # values=blocks: d = q
    dims = head_dims(d, H)
    assert sum(dims) == d and min(dims) >= 0
    for r in (1, 3):
        aux = kernel_plan(ctx, r, 8, "blocks", heads=H).aux.astype(np.int64)
        assert aux[:_T].tolist() == [H, r, 1, d]
        entry, stride, head = (aux[_T + i * d : _T + (i + 1) * d] for i in range(3))
        starts = aux[_T + 3 * d : _T + 3 * d + H]
        assert aux[_T + 3 * d + H :].tolist() == dims
        for h in range(H):
            assert starts[h] == r * sum(dh + 1 for dh in dims[:h])
        for c in range(d):
            h = c % H
            assert head[c] == h and stride[c] == dims[h] + 1
            assert entry[c] == starts[h] + 1 + c // H


@pytest.mark.parametrize("d", [1, 63, 64, 65, 128, 200])
def test_word_below_clears_elements_from_d(d):
    rng = np.random.default_rng(d)
    words = -(-d // 64)
    for bits in (np.zeros(4, np.uint64), np.full(4, 2**64 - 1, np.uint64)) + tuple(
        rng.integers(0, 2**64 - 1, (20, 4), dtype=np.uint64, endpoint=True)
    ):
        for w in range(words):  # the callers' range: words holding an element below d
            keep = min(64, d - 64 * w)
            assert int(_word_below(bits, w, d)) == int(bits[w]) & ((1 << keep) - 1)
