"""The error-rate floor (docs/theory.md 5.4) against exact entropies of small channels."""

import itertools
import math
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sketchsim.sketch.fano import binary_entropy, fano_floor, per_answer_floor, sampled_floor
from sketchsim.sketch.verdicts import error_rate_upper


def entropy(counts) -> float:
    n = sum(counts)
    return -sum(c / n * math.log2(c / n) for c in counts if c)


def channel(q, s, alphabet, seed):
    """A random deterministic transcript ``T = f(A)`` of uniform answers ``A`` and a readout
    ``g(T)``: the best one (majority) or a random one; their exact H(T), P_e, p_i."""
    rng = np.random.default_rng(seed)
    answers = list(itertools.product(range(s + 1), repeat=q))
    f = {a: int(rng.integers(alphabet)) for a in answers}
    by_t: dict[int, list] = {}
    for a in answers:
        by_t.setdefault(f[a], []).append(a)
    if rng.random() < 0.5:
        g = {t: Counter(group).most_common(1)[0][0] for t, group in by_t.items()}
    else:
        g = {t: answers[int(rng.integers(len(answers)))] for t in by_t}
    n = len(answers)
    h_t = entropy([len(group) for group in by_t.values()])
    p_e = sum(g[f[a]] != a for a in answers) / n
    p_i = [sum(g[f[a]][i] != a[i] for a in answers) / n for i in range(q)]
    return h_t, p_e, p_i


@settings(max_examples=300, deadline=None)
@given(q=st.integers(1, 3), s=st.integers(1, 3), alphabet=st.integers(1, 70),
       seed=st.integers(0, 2**32 - 1))  # fmt: skip
def test_no_channel_beats_either_floor(q, s, alphabet, seed):
    h_t, p_e, p_i = channel(q, s, alphabet, seed)
    bits = q * math.log2(s + 1)
    assert h_t >= fano_floor(bits, bits, p_e) - 1e-9
    assert h_t >= per_answer_floor(s, p_i) - 1e-9


def test_the_floor_is_the_bound_at_no_error_and_zero_at_chance():
    assert fano_floor(192.0, 192.0, 0.0) == 192.0
    assert fano_floor(3.0, 3.0, 7 / 8) == pytest.approx(0.0, abs=1e-12)
    assert fano_floor(3.0, 3.0, 1.0) == 0.0
    # hand-computed: M = 8, p = 1/2: 3 - 1 - log2(7)/2
    assert fano_floor(3.0, 3.0, 0.5) == pytest.approx(2 - math.log2(7) / 2)
    # decreasing in the error rate, so an upper bound on it gives a floor
    ps = np.linspace(0, 1, 101)
    values = [fano_floor(12.0, 12.0, p) for p in ps]
    assert all(a >= b for a, b in zip(values, values[1:], strict=False))
    # q = 64, s = 7 without forming 8^64: log2(M - 1) is 192 to double precision
    assert fano_floor(192.0, 192.0, 1e-3) == pytest.approx(192 - binary_entropy(1e-3) - 0.192)


def test_the_per_answer_form_at_s_one_is_the_binary_entropies():
    assert per_answer_floor(1, [0.1, 0.2]) == pytest.approx(2 - binary_entropy(0.1)
                                                            - binary_entropy(0.2))  # fmt: skip
    assert per_answer_floor(1, [0.5, 0.0]) == pytest.approx(1.0)


def test_a_sample_floor_uses_the_clopper_pearson_bound():
    p = error_rate_upper(0, 20_000)
    assert sampled_floor(192.0, 64, 7, 0, 20_000) == pytest.approx(fano_floor(192.0, 192.0, p))
    assert sampled_floor(192.0, 64, 7, 0, 20_000) < 192.0
    assert sampled_floor(192.0, 64, 7, 3, 20_000) < sampled_floor(192.0, 64, 7, 0, 20_000)
    with pytest.raises(ValueError):
        fano_floor(3.0, 3.0, 1.5)


def test_a_sampled_report_carries_its_floor():
    from sketchsim.sketch.family import HardFamily
    from sketchsim.sketch.measure import choose_answers, measure
    from sketchsim.sketch.plugins import resolve

    fam = HardFamily(8, 7)
    mode, T = choose_answers(fam, None, 500)
    r = resolve("block-counts")
    rep = measure(fam, T, r.protocol, r.params)
    assert mode == "sampled" and rep.decoded is None
    assert rep.floor_at_error == pytest.approx(
        fano_floor(fam.bound_bits, fam.bound_bits, error_rate_upper(0, 500)))  # fmt: skip
    assert rep.floor_at_error < fam.bound_bits <= rep.declared_bits
    exact = measure(HardFamily(2, 1), choose_answers(HardFamily(2, 1), None, 10)[1],
                    r.protocol, r.params)  # fmt: skip
    assert exact.floor_at_error is None


def test_theory_doc_numbers_are_the_functions():
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "theory.md").read_text()
    u = error_rate_upper(0, 20_000)
    floor = fano_floor(192.0, 192.0, u)
    assert f"`u = {u:.1e}` and a floor of {floor:.2f} of the 192 bits" in text
