"""The grouping's jitted bucket sort against NumPy's stable argsort and a Python grouping."""

import numpy as np
import pytest

from sketchsim.sketch.grouping import bucket_order, group_transcripts

TOP = np.uint64(2**64 - 1)


def _keys(case: str) -> np.ndarray:
    rng = np.random.default_rng(11)
    hashes = rng.integers(0, TOP, size=5000, dtype=np.uint64, endpoint=True)
    return {
        "hashes": hashes,
        "one": hashes[:1],
        "two": hashes[:2][::-1].copy(),
        "three": hashes[:3],
        "few values": hashes[:7][rng.integers(0, 7, 5000)],
        "all equal": np.full(5000, 12345, dtype=np.uint64),  # one bucket, in order already
        "low bits only": hashes >> np.uint64(30),  # one bucket, merge-sorted
        "descending": np.sort(hashes)[::-1].copy(),
        "extremes": np.array([TOP, 0, TOP, 1, 0, TOP - np.uint64(1)], dtype=np.uint64),
        "strided": np.repeat(hashes[:1000], 2).reshape(1000, 2)[:, 1],
    }[case]


CASES = ["hashes", "one", "two", "three", "few values", "all equal", "low bits only",
         "descending", "extremes", "strided"]  # fmt: skip


@pytest.mark.parametrize("case", CASES)
def test_bucket_order_is_numpys_stable_argsort(case):
    keys = _keys(case)
    order, sorted_keys = bucket_order(keys)
    want = np.argsort(keys, kind="stable")
    np.testing.assert_array_equal(order, want)
    np.testing.assert_array_equal(sorted_keys, keys[want])


def _python_groups(fp):
    """Group ids as ranks of the distinct (fp0, fp1) rows, by Python sorting."""
    rows = [tuple(r) for r in fp.tolist()]
    rank = {r: k for k, r in enumerate(sorted(set(rows)))}
    return np.array([rank[r] for r in rows], dtype=np.int64)


@pytest.mark.parametrize("case", [*CASES, "second word differs"])
def test_group_transcripts_equals_python_sorting(case):
    keys = _keys("few values" if case == "second word differs" else case)
    rng = np.random.default_rng(5)
    fp = np.stack([keys, keys * np.uint64(3) + np.uint64(1)], axis=1)
    if case == "second word differs":  # equal first words, different second: lexsort path
        fp[::3, 1] = rng.integers(0, 9, size=fp[::3].shape[0]).astype(np.uint64)
    inverse, counts = group_transcripts(fp)
    want = _python_groups(fp)
    np.testing.assert_array_equal(inverse, want)
    np.testing.assert_array_equal(counts, np.bincount(want))
