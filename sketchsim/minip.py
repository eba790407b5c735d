"""Min-IP targets ``t_i = min_j <x_i, x_j>`` (THEORY section 1)."""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from sketchsim.bits import as_binary, popcount64

__all__ = ["minip_targets", "minip_targets_packed"]


@njit(parallel=True, cache=True)
def _minip_packed(W):
    B, N, nw = W.shape
    out = np.empty((B, N), dtype=np.int64)
    for b in prange(B):
        for i in range(N):
            best = np.int64(1) << 62
            for j in range(N):
                c = np.int64(0)
                for w in range(nw):
                    c += popcount64(W[b, i, w] & W[b, j, w])
                if c < best:
                    best = c
            out[b, i] = best
    return out


@njit(parallel=True, cache=True)
def _minip_bytes(X):
    """Targets straight from 0/1 bytes (B, N, m): packs each sequence on the fly.

    Returns the targets and the number of entries that are neither 0 nor 1.
    """
    B, N, m = X.shape
    nw = (m + 63) // 64
    out = np.empty((B, N), dtype=np.int64)
    bad = np.zeros(B, dtype=np.int64)
    for b in prange(B):
        W = np.zeros((N, nw), dtype=np.uint64)
        for i in range(N):
            for k in range(m):
                v = X[b, i, k]
                if v > 1:
                    bad[b] += 1
                W[i, k >> 6] |= np.uint64(v & 1) << np.uint64(k & 63)
        for i in range(N):
            best = np.int64(1) << 62
            for j in range(N):
                c = np.int64(0)
                for w in range(nw):
                    c += popcount64(W[i, w] & W[j, w])
                if c < best:
                    best = c
            out[b, i] = best
    return out, bad.sum()


def minip_targets_packed(W) -> np.ndarray:
    """Min-IP targets for packed tokens ``W`` of shape (B, N, words); returns (B, N) int64."""
    W = np.ascontiguousarray(W, dtype=np.uint64)
    if W.ndim != 3:
        raise ValueError(f"packed tokens must have shape (B, N, words), got {W.shape}")
    return _minip_packed(W)


def minip_targets(X) -> np.ndarray:
    """Min-IP targets of Boolean token sequences.

    Parameters
    ----------
    X : array_like, shape (B, N, m) or (N, m)
        Bool or integer 0/1 tokens; any ``m >= 1``, ``N >= 1``, ``B >= 0``.

    Returns
    -------
    numpy.ndarray of int64, shape (B, N) or (N,)
        ``t[b, i] = min_j <X[b, i], X[b, j]>`` (``j = i`` included).

    Examples
    --------
    >>> minip_targets([[1, 1, 0], [0, 1, 1], [1, 1, 1]]).tolist()
    [1, 1, 2]
    """
    X = np.asarray(X)
    if X.ndim not in (2, 3):
        raise ValueError(f"X must have shape (B, N, m) or (N, m), got rank {X.ndim}")
    if X.dtype == np.bool_ or X.dtype == np.uint8:
        if X.shape[-1] < 1:
            raise ValueError("X has token width m = 0; m must be >= 1")
        X = X.view(np.uint8)  # validated inside the kernel, no copy
    else:
        X = as_binary(X)
    if X.shape[-2] < 1:
        raise ValueError("X has N = 0 tokens; N must be >= 1")
    single = X.ndim == 2
    t, n_bad = _minip_bytes(np.ascontiguousarray(X[None] if single else X))
    if n_bad:
        raise ValueError(f"X must hold only 0 and 1, found {n_bad} other entries")
    return t[0] if single else t
