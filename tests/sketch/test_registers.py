"""The register and the answer rounding, written once (#62): the jitted form, the torch form
and a plain reference agree on ties, saturation, NaN and random values."""

import math

import numpy as np
import pytest

from sketchsim.sketch.registers import answer_of, register, register_steps


def reference_code(x, lo, step, top):
    """docs/theory.md 5.3, in plain Python."""
    if x != x:
        return 0.0
    z = float(np.floor((x - lo) / step + 0.5))
    return float(min(max(z, 0), top))


CASES = [(0.5, 0.0, 1.0, 7.0), (1.5, 0.0, 1.0, 7.0), (-0.5, 0.0, 1.0, 7.0), (-3.0, 0.0, 1.0, 7.0),
         (100.0, 0.0, 1.0, 7.0), (float("nan"), 0.0, 1.0, 7.0), (float("inf"), 0.0, 1.0, 3.0),
         (0.3, -1.0, 0.1, 31.0)]  # fmt: skip


@pytest.mark.parametrize("x, lo, step, top", CASES)
def test_jitted_register_is_the_reference(x, lo, step, top):
    code, value = register(x, lo, step, top)
    assert code == reference_code(x, lo, step, top)
    assert value == lo + step * code
    assert register(x, lo, step, -1.0)[0] == 0.0  # no registers: exact


def test_random_values_and_the_torch_form():
    torch = pytest.importorskip("torch")
    from sketchsim.experiments.registers import register_codes, register_values

    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(0, 3, 500), [np.nan, 0.5, 1.5, 2.5]])
    lo, span, bits = -2.0, 5.0, 3
    step = float(register_steps(np.array([span]), bits)[0])
    top = float(2**bits - 1)
    want = np.array([reference_code(v, lo, step, top) for v in x])
    got = np.array([register(v, lo, step, top)[0] for v in x])
    np.testing.assert_array_equal(got, want)
    t = torch.tensor(x)
    np.testing.assert_array_equal(register_codes(t, lo, step, top).numpy(), want)
    np.testing.assert_allclose(register_values(t, lo, step, top).numpy(), lo + step * want)
    assert register_steps(np.array([0.0]), 4)[0] == 1.0


@pytest.mark.parametrize("y, s, want", [(2.5, 7, 3), (2.49, 7, 2), (-7.0, 7, -1), (99.0, 7, 8),
                                        (float("nan"), 7, -1), (-0.5, 3, 0)])  # fmt: skip
def test_answer_rounding(y, s, want):
    assert answer_of(y, s) == want == reference_answer(y, s)


def reference_answer(y, s):
    """docs/theory.md 5.2's answer, in plain Python."""
    if y != y:
        return -1
    return min(max(math.floor(y + 0.5), -1), s + 1)
