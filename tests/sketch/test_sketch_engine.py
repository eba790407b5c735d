import math

import naive
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from protocol_examples import BAD, PY_COUNTS, random_protocol

from sketchsim.errors import ProtocolError
from sketchsim.sketch import HardFamily
from sketchsim.sketch.channels import declared_bits, log2_range
from sketchsim.sketch.engine import Engine
from sketchsim.sketch.measure import choose_answers, measure
from sketchsim.sketch.plugins import resolve_spec
from sketchsim.sketch.protocol import Layer

#: One to three layers of random protocols: (channel, alphabet, symbols).
LAYERS = st.lists(
    st.tuples(
        st.sampled_from(["sum", "histogram", "concat"]), st.integers(1, 4), st.integers(1, 3)
    ),
    min_size=1,
    max_size=3,
)


def test_family_layout_and_targets():
    import sketchsim

    fam = HardFamily(4, 3, seed=7)
    assert fam.m == 4 * 3 + 4 and fam.n_tokens == 5
    T = fam.all_answers()
    assert T.shape == (64 * 4, 4) and len({tuple(t) for t in T}) == 4**4
    X = sketchsim.unpack_bits(fam.tokens(T), fam.m)
    targets = sketchsim.minip_targets(X)
    np.testing.assert_array_equal(targets[:, :4], T)  # the answer at query i is t_i
    assert (X[:, 4, 12:] == 0).all()  # the data token leaves the pad empty
    assert fam.bound_bits == pytest.approx(8.0)


def test_family_seed_changes_layout_only():
    a, b = HardFamily(3, 5, seed=1), HardFamily(3, 5, seed=2)
    assert not np.array_equal(a.perm, b.perm)
    np.testing.assert_array_equal(a.query_words, b.query_words)
    np.testing.assert_array_equal(a.sample_answers(50), HardFamily(3, 5, seed=1).sample_answers(50))


def brute_force_range(channel, k, a, n, levels=0):
    """Count distinct sketches over every assignment of symbols to speakers."""
    import itertools

    seen = set()
    for msgs in itertools.product(itertools.product(range(a), repeat=k), repeat=n):
        if channel == "sum":
            sk = tuple(
                min(sum(m[c] for m in msgs), levels - 1) if levels else sum(m[c] for m in msgs)
                for c in range(k)
            )
        elif channel == "histogram":
            sk = tuple(sum(m[c] == v for m in msgs) for c in range(k) for v in range(a))
        else:
            sk = msgs
        seen.add(sk)
    return len(seen)


@pytest.mark.parametrize(
    "channel,k,a,n,levels",
    [
        ("sum", 2, 3, 3, 0),
        ("sum", 1, 4, 3, 5),
        ("histogram", 2, 3, 3, 0),
        ("histogram", 1, 2, 4, 0),
        ("concat", 2, 3, 2, 0),
        ("sum", 3, 2, 1, 0),
    ],
)
def test_declared_range_equals_reachable_sketches(channel, k, a, n, levels):
    assert 2 ** log2_range(channel, k, a, n, levels) == pytest.approx(
        brute_force_range(channel, k, a, n, levels)
    )


@pytest.mark.parametrize(
    "spec",
    [
        "raw",
        "block-counts",
        "clipped-counts",
        "kernel:bits=3",
        "kernel:values=blocks,r=2",
        "multihead:heads=3,bits=4",
    ],
)
@pytest.mark.parametrize("q,s", [(2, 3), (3, 2)])
def test_jitted_engine_matches_naive(spec, q, s):
    fam = HardFamily(q, s, seed=3)
    proto, params, _ = resolve_spec(spec)
    plan = proto.plan(fam.context(), params)
    tokens = fam.tokens(fam.all_answers())
    res = Engine(plan, fam.context(), proto.name).run(tokens, store=True)
    ref_tr, ref_ans = naive.run_protocol(plan, fam.context(), tokens)
    assert [tuple(t) for t in res.transcripts.tolist()] == ref_tr
    np.testing.assert_array_equal(res.answers, ref_ans)
    # equal fingerprints exactly when transcripts are equal
    fp = {tuple(f) for f in res.fingerprints.tolist()}
    assert len(fp) == len(set(ref_tr))


@pytest.mark.parametrize(
    "spec",
    ["raw", "block-counts", "kernel:bits=3", "kernel:values=blocks,r=2", "multihead:heads=3"],
)
@pytest.mark.parametrize("q,s", [(2, 3), (4, 2)])
def test_shared_tokens_emitted_once_change_nothing(spec, q, s):
    """Layer 0's fixed speakers are emitted once per batch: same as every token per input."""
    fam = HardFamily(q, s, seed=5)
    proto, params, _ = resolve_spec(spec)
    ctx = fam.context()
    T = fam.sample_answers(300)
    full = Engine(proto.plan(ctx, params), ctx, proto.name).run(fam.tokens(T), store=True)
    split = Engine(proto.plan(ctx, params), ctx, proto.name).run(
        fam.variable_tokens(T), store=True, fixed=fam.fixed_tokens()
    )
    for a, b in [
        (full.fingerprints, split.fingerprints),
        (full.answers, split.answers),
        (full.transcripts, split.transcripts),
    ]:
        np.testing.assert_array_equal(a, b)


@pytest.mark.slow  # 25 examples of random multilayer plans: about 13 s on the 2-core machine
@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10**6), layers=LAYERS, init=st.booleans())
def test_shared_tokens_on_multilayer_protocols(seed, layers, init):
    """Later layers see the state the shared tokens' first-layer symbols (and init) produced."""
    fam = HardFamily(3, 2, seed=1)
    proto = random_protocol(seed, layers, init=init)
    ctx = fam.context()
    T = fam.all_answers()
    plan = proto.plan(ctx, {})
    full = Engine(plan, ctx, proto.name).run(fam.tokens(T), store=True)
    split = Engine(plan, ctx, proto.name).run(
        fam.variable_tokens(T), store=True, fixed=fam.fixed_tokens()
    )
    np.testing.assert_array_equal(full.fingerprints, split.fingerprints)
    np.testing.assert_array_equal(full.answers, split.answers)
    np.testing.assert_array_equal(full.transcripts, split.transcripts)


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10**6),
    layers=LAYERS,
    speakers=st.sampled_from(["all", "last"]),
    init=st.booleans(),
)
def test_random_protocols_match_naive(seed, layers, speakers, init):
    """Jitted (shared tokens split off) and plain-Python engines agree with naive.run_protocol."""
    fam = HardFamily(2, 2, seed=2)
    proto = random_protocol(seed, layers, speakers, init=init)
    ctx = fam.context()
    plan = proto.plan(ctx, {})
    T = fam.all_answers()
    jit = Engine(plan, ctx, proto.name).run(
        fam.variable_tokens(T), store=True, fixed=fam.fixed_tokens()
    )
    with np.errstate(over="ignore"):  # the hashes wrap around on purpose
        ref_tr, ref_ans = naive.run_protocol(plan, ctx, fam.tokens(T))
        py = Engine(plan, ctx, proto.name, python=True).run(fam.tokens(T), store=True)
    for res in (jit, py):
        assert [tuple(t) for t in res.transcripts.tolist()] == ref_tr
        np.testing.assert_array_equal(res.answers, ref_ans)


def test_init_changes_the_transcript():
    """The check above can fail: a protocol's init is not a no-op in either engine."""
    fam = HardFamily(2, 2, seed=2)
    ctx = fam.context()
    T = fam.all_answers()
    runs = [
        Engine(random_protocol(5, [("concat", 4, 2)], init=i).plan(ctx, {}), ctx, "r").run(
            fam.tokens(T), store=True
        )
        for i in (False, True)
    ]
    assert not np.array_equal(runs[0].transcripts, runs[1].transcripts)


def test_python_engine_matches_jitted():
    fam = HardFamily(3, 3, seed=0)
    proto, params, _ = resolve_spec("kernel:values=blocks,bits=3")
    plan = proto.plan(fam.context(), params)
    tokens = fam.tokens(fam.sample_answers(40))
    a = Engine(plan, fam.context(), "k").run(tokens, store=True)
    b = Engine(plan, fam.context(), "k", python=True).run(tokens, store=True)
    for x, y in [
        (a.fingerprints, b.fingerprints),
        (a.answers, b.answers),
        (a.transcripts, b.transcripts),
    ]:
        np.testing.assert_array_equal(x, y)


def test_symbol_outside_alphabet_is_a_protocol_error():
    fam = HardFamily(2, 2)
    with pytest.raises(ProtocolError, match=r"bad-symbol: layer 1, token 2.*symbol 7"):
        measure(fam, fam.all_answers(), BAD, {})


def test_pure_python_protocol_runs_and_is_marked():
    fam = HardFamily(3, 2)
    rep = measure(fam, fam.all_answers(), PY_COUNTS, PY_COUNTS.defaults())
    assert rep.engine == "python (slow)"
    assert rep.correct_fraction == 1.0 and rep.declared_bits == pytest.approx(fam.bound_bits)


@pytest.mark.parametrize("q,s", [(1, 1), (2, 3), (4, 2), (3, 4)])
def test_tightness_exhaustive(q, s):
    fam = HardFamily(q, s, seed=q + s)
    mode, T = choose_answers(fam, None, 10)
    assert mode == "exhaustive" and T.shape[0] == (s + 1) ** q
    proto, params, _ = resolve_spec("block-counts")
    rep = measure(fam, T, proto, params)
    assert rep.correct_fraction == 1.0 and rep.meets_bound
    assert rep.declared_bits == pytest.approx(q * math.log2(s + 1))
    assert rep.distinct_transcripts == (s + 1) ** q


@pytest.mark.parametrize(
    "spec", ["clipped-counts", "clipped-counts:levels=2", "kernel:bits=1,values=blocks"]
)
@pytest.mark.parametrize("q,s", [(2, 3), (3, 3), (5, 2)])
def test_below_bound_shown_wrong_by_collision(spec, q, s):
    fam = HardFamily(q, s, seed=1)
    proto, params, _ = resolve_spec(spec)
    plan = proto.plan(fam.context(), params)
    assert declared_bits(plan.layers, fam.n_tokens) < fam.bound_bits
    T = fam.all_answers()
    rep = measure(fam, T, proto, params)
    assert not rep.meets_bound and rep.correct_fraction < 1
    c = rep.collision
    assert c["verified"] and c["answers_a"] != c["answers_b"]
    i, j = c["inputs"]
    tr, ans = naive.run_protocol(plan, fam.context(), fam.tokens(T[[i, j]]))
    assert tr[0] == tr[1]  # the same transcript, checked by the naive engine
    pos = c["position"] - 1
    assert T[i, pos] != T[j, pos] and ans[0, pos] == ans[1, pos]


def test_kernel_precision_threshold():
    fam = HardFamily(5, 3, seed=0)
    T = fam.sample_answers(500)
    proto, _, _ = resolve_spec("kernel")
    # N = 6 tokens: identity sums reach 6 and need 3 bits; 2 bits saturate
    good = measure(fam, T, proto, proto.resolve({"bits": "3"}))
    bad = measure(fam, T, proto, proto.resolve({"bits": "2"}))
    assert good.correct_fraction == 1.0 and bad.correct_fraction < 1
    assert good.declared_bits == (fam.m + 1) * 3


@settings(max_examples=40, deadline=None)
@given(
    q=st.integers(1, 3),
    s=st.integers(1, 3),
    seed=st.integers(0, 10**6),
    layers=LAYERS,
    speakers=st.sampled_from(["all", "last"]),
)
def test_entropy_le_log2_distinct_le_declared(q, s, seed, layers, speakers):
    fam = HardFamily(q, s, seed=seed % 7)
    proto = random_protocol(seed, layers, speakers)
    rep = measure(fam, fam.all_answers(), proto, {})
    assert rep.entropy_bits <= rep.log2_distinct + 1e-9
    assert rep.log2_distinct <= rep.declared_bits + 1e-9
    if not rep.meets_bound:  # the theorem: below the bound, a certified failure
        assert rep.correct_fraction < 1 and rep.collision is not None


def test_layer_validation():
    from sketchsim.errors import PluginError

    with pytest.raises(PluginError, match="unknown channel"):
        Layer("xor", 1, 2)
    with pytest.raises(PluginError, match="levels"):
        Layer("concat", 1, 2, levels=4)
    with pytest.raises(PluginError, match="speakers"):
        Layer("sum", 1, 2, speakers=(0, 9)).speaker_positions(3)


@pytest.mark.parametrize("bad_pos", [2, 0])
@pytest.mark.parametrize("value,channel", [(-1, "concat"), (7, "sum"), (-3, "histogram")])
def test_compiled_engine_checks_symbols_itself(value, channel, bad_pos):
    """Without the guarded pass (a built-in), the compiled loop still refuses bad symbols."""
    import dataclasses

    from numba import njit

    from sketchsim.sketch.protocol import Plan, Protocol

    @njit
    def emit(layer, pos, bits, ctx, state, aux, out):
        out[1] = int(aux[0]) if pos == int(aux[1]) else 1

    def setup(ctx, params):
        layer = Layer(channel, 3, 4)
        plan = BAD.setup(ctx, {})
        return Plan([layer], 1, emit, plan.update, plan.answer, [value, bad_pos])

    proto = dataclasses.replace(Protocol("trusted", "t", setup), builtin=True)
    fam = HardFamily(2, 2)
    with pytest.raises(
        ProtocolError, match=rf"trusted: layer 1, token {bad_pos + 1}, slot 2 .*symbol {value}\b"
    ):
        measure(fam, fam.all_answers(), proto, {})
