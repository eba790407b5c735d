import numpy as np
import pytest

from sketchsim import pack_bits
from sketchsim.sketch.packed_tokens import bit, count_ones, field, inner_product


@pytest.mark.parametrize("m", [1, 63, 64, 65, 128, 200])
@pytest.mark.parametrize("fill", ["random", "zeros", "ones"])
def test_token_helpers_match_plain_python(m, fill):
    rng = np.random.default_rng(m)
    x = {"random": rng.integers(0, 2, m), "zeros": np.zeros(m, int), "ones": np.ones(m, int)}[fill]
    y = rng.integers(0, 2, m)
    bx, by = pack_bits(x), pack_bits(y)
    assert [bit(bx, k) for k in range(m)] == x.tolist()
    assert inner_product(bx, by) == int(x @ y)
    for lo in range(0, m, 7):
        assert count_ones(bx, lo + 1, lo) == 0
        for hi in (lo, lo + 1, *(min(m, lo + d) for d in (7, 63, 64, 65, 128)), m):
            assert count_ones(bx, lo, hi) == int(x[lo:hi].sum())
        for width in (1, 5, 32):
            if lo + width <= m:
                expected = sum(int(v) << t for t, v in enumerate(x[lo : lo + width]))
                assert field(bx, lo, width) == expected
