"""The 128-bit transcript fingerprint: two position-keyed sums of 64-bit mixers.

One home for its constants: the jitted engine, the plain-Python engine
(:mod:`sketchsim.sketch.contract`) and the cluster's answer hash all fold with
these.  Each lane is a sum over entries of a 64-bit mixer (splitmix64, murmur3
fmix64) applied to the value keyed by its position, so entries hash
independently and the sum vectorises (a chained hash costs ~15 cycles of
latency per entry).  Equal transcripts give equal fingerprints; different ones
collide with probability about 2^-128.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["SEED1", "SEED2", "fold", "fold_py", "answer_hashes"]

M1 = 0xBF58476D1CE4E5B9  # splitmix64 finalizer
M2 = 0x94D049BB133111EB
C1 = 0xFF51AFD7ED558CCD  # murmur3 fmix64
C2 = 0xC4CEB9FE1A85EC53
G1 = 0x9E3779B97F4A7C15  # position keys
G2 = 0xD1B54A32D192ED03
SEED1 = 0x243F6A8885A308D3  # initial values of the two lanes
SEED2 = 0x13198A2E03707344
MASK = (1 << 64) - 1


@njit(inline="always")
def fold(h1, h2, e, v):
    """Add entry ``e`` (value ``v``) of the transcript to both lanes; uint64 arithmetic."""
    u = np.uint64(v)
    p = np.uint64(e) + np.uint64(1)
    x = u + p * np.uint64(G1)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(M1)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(M2)
    y = u ^ (p * np.uint64(G2))
    y = (y ^ (y >> np.uint64(33))) * np.uint64(C1)
    y = (y ^ (y >> np.uint64(33))) * np.uint64(C2)
    return h1 + (x ^ (x >> np.uint64(31))), h2 + (y ^ (y >> np.uint64(33)))


def fold_py(h1, h2, e, v):
    """:func:`fold` on Python ints (the plain-Python engine)."""
    u = int(v) & MASK
    p = e + 1
    x = (u + p * G1) & MASK
    x = ((x ^ (x >> 30)) * M1) & MASK
    x = ((x ^ (x >> 27)) * M2) & MASK
    y = u ^ ((p * G2) & MASK)
    y = ((y ^ (y >> 33)) * C1) & MASK
    y = ((y ^ (y >> 33)) * C2) & MASK
    return (h1 + (x ^ (x >> 31))) & MASK, (h2 + (y ^ (y >> 33))) & MASK


def answer_hashes(T: np.ndarray) -> np.ndarray:
    """A 128-bit hash (B, 2) uint64 of each answer vector (the cluster's shuffle key).

    The same mixers keyed by the answer's column (no seed): equal answers give
    equal hashes; different answers give equal hashes with probability about
    2^-128 (then a collision candidate would be missed).
    """
    B, q = T.shape
    h = np.zeros((B, 2), dtype=np.uint64)
    for col in range(q):
        v = T[:, col].astype(np.uint64)
        x = v + np.uint64(((col + 1) * G1) & MASK)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(M1)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(M2)
        y = v ^ np.uint64(((col + 1) * G2) & MASK)
        y = (y ^ (y >> np.uint64(33))) * np.uint64(C1)
        y = (y ^ (y >> np.uint64(33))) * np.uint64(C2)
        h[:, 0] += x ^ (x >> np.uint64(31))
        h[:, 1] += y ^ (y >> np.uint64(33))
    return h
