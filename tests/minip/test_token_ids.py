"""sketchsim.minip.token_ids.token_ids against a plain-Python numbering (sorted distinct tuples)."""

import numpy as np
import pytest

from sketchsim.minip.token_ids import packed_keys, token_ids


def naive_ids(tokens):
    rows = [tuple(int(v) for v in row) for row in tokens.reshape(-1, tokens.shape[-1])]
    order = {row: i for i, row in enumerate(sorted(set(rows)))}
    return np.array([order[r] for r in rows]).reshape(tokens.shape[:-1]), len(order)


@pytest.mark.parametrize("m", [1, 2, 7, 24, 25, 63, 64, 65, 128])
@pytest.mark.parametrize("fill", ["random", "zeros", "ones"])
def test_token_ids_match_plain_python(m, fill):
    rng = np.random.default_rng(m)
    shape = (17, 3, m)
    tokens = {
        "random": rng.integers(0, 2, shape),
        "zeros": np.zeros(shape, int),
        "ones": np.ones(shape, int),
    }[fill].astype(np.uint8)
    if fill == "random":  # some repeats, so equal tokens must share ids
        tokens[5] = tokens[2]
    ids, count = token_ids(tokens)
    want, want_count = naive_ids(tokens)
    assert ids.dtype == np.int64 and ids.shape == (17, 3)
    assert np.array_equal(ids, want) and count == want_count


def test_token_ids_any_dtype_and_empty():
    tokens = np.array([[[1, 0], [0, 1]], [[0, 0], [1, 0]]])
    for dtype in (np.uint8, np.int64, np.float32, bool):
        ids, count = token_ids(tokens.astype(dtype))
        assert ids.tolist() == [[2, 1], [0, 2]] and count == 3
    ids, count = token_ids(np.zeros((0, 3, 5), np.uint8))
    assert ids.shape == (0, 3) and count == 0
    ids, count = token_ids(np.zeros((4, 0), np.uint8))
    assert ids.tolist() == [0, 0, 0, 0] and count == 1


@pytest.mark.parametrize("m", [1, 8, 63, 64])
def test_packed_keys_are_the_binary_numbers(m):
    rng = np.random.default_rng(m)
    tokens = rng.integers(0, 2, (9, m)).astype(np.uint8)
    keys = packed_keys(tokens)
    assert [int(k) for k in keys] == [int("".join(map(str, row)), 2) for row in tokens]
    with pytest.raises(ValueError):
        packed_keys(np.zeros((2, 65), np.uint8))
