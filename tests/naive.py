"""Slow, obviously-correct references for every jitted kernel."""

from __future__ import annotations

import numpy as np


def minip_targets(X: np.ndarray) -> np.ndarray:
    """t[b, i] = min_j <x_i, x_j> with an explicit integer Gram matrix."""
    X = np.asarray(X, dtype=np.int64)
    gram = np.einsum("...im,...jm->...ij", X, X)
    return gram.min(axis=-1)


def pack_bits(X: np.ndarray) -> np.ndarray:
    """Pack bit k of each token into word k // 64, bit k % 64, one bit at a time."""
    X = np.asarray(X)
    m = X.shape[-1]
    w = (m + 63) // 64
    out = np.zeros(X.shape[:-1] + (w,), dtype=np.uint64)
    flat_in = X.reshape(-1, m)
    flat_out = out.reshape(-1, w)
    for row in range(flat_in.shape[0]):
        for k in range(m):
            if flat_in[row, k]:
                flat_out[row, k // 64] |= np.uint64(1) << np.uint64(k % 64)
    return out
