"""Bit packing and the popcount intrinsic.

Tokens in ``{0,1}^m`` are stored little-endian in ``uint64`` words: element
``k`` of a token is bit ``k % 64`` of word ``k // 64``.  Unused high bits of the
last word are always zero, so popcounts of ANDed words are exact inner products.
"""

from __future__ import annotations

import numpy as np
from numba import config as numba_config
from numba import njit, types
from numba.extending import intrinsic

__all__ = ["pack_bits", "unpack_bits", "popcount64", "n_words", "as_binary"]


@intrinsic
def _ctpop64(typingctx, x):
    """LLVM ``ctpop`` on a uint64, returned as int64 (avoids uint64/int64 -> float64)."""
    if not isinstance(x, types.Integer):
        return None
    sig = types.int64(types.uint64)

    def codegen(context, builder, signature, args):
        return builder.ctpop(args[0])

    return sig, codegen


if numba_config.DISABLE_JIT:  # pragma: no cover - exercised by the no-JIT CI job

    def popcount64(x):
        """Number of set bits of a 64-bit word (Python fallback)."""
        return int(x).bit_count()

else:

    @njit(inline="always")
    def popcount64(x):
        """Number of set bits of a 64-bit word, as int64 (LLVM ``ctpop``)."""
        return _ctpop64(np.uint64(x))


def n_words(m: int) -> int:
    """Number of uint64 words that hold ``m`` bits."""
    return (m + 63) // 64


def as_binary(X, name: str = "X") -> np.ndarray:
    """Validate a 0/1 array (bool or integer) and return it as uint8.

    Raises
    ------
    ValueError
        If the array is not boolean/integer, holds values other than 0 and 1,
        or has an empty last axis.
    """
    X = np.asarray(X)
    if X.ndim < 1:
        raise ValueError(f"{name} must have at least one axis (the token width m)")
    if X.shape[-1] < 1:
        raise ValueError(f"{name} has token width m = 0; m must be >= 1")
    if X.dtype == np.bool_:
        return X.astype(np.uint8)
    if not np.issubdtype(X.dtype, np.integer):
        raise ValueError(f"{name} must be bool or integer 0/1, got dtype {X.dtype}")
    if X.size and (X.min() < 0 or X.max() > 1):
        bad = X[(X != 0) & (X != 1)].flat[0]
        raise ValueError(f"{name} must hold only 0 and 1, found {bad}")
    return X.astype(np.uint8)


def pack_bits(X) -> np.ndarray:
    """Pack 0/1 tokens into little-endian uint64 words.

    Parameters
    ----------
    X : array_like, shape (..., m)
        Bool or integer 0/1 values.

    Returns
    -------
    numpy.ndarray of uint64, shape (..., ceil(m / 64))

    Examples
    --------
    >>> pack_bits([1, 0, 1]).tolist()
    [5]
    """
    X = as_binary(X)
    m = X.shape[-1]
    w = n_words(m)
    padded = np.zeros(X.shape[:-1] + (w * 64,), dtype=np.uint8)
    padded[..., :m] = X
    packed = np.packbits(padded, axis=-1, bitorder="little")
    return np.ascontiguousarray(packed).view("<u8").astype(np.uint64, copy=False)


def unpack_bits(W, m: int) -> np.ndarray:
    """Inverse of :func:`pack_bits`: uint64 words of shape (..., w) to (..., m) uint8."""
    W = np.asarray(W)
    if m < 1:
        raise ValueError(f"m must be >= 1, got {m}")
    if W.ndim < 1 or W.shape[-1] != n_words(m):
        raise ValueError(f"expected {n_words(m)} words per token for m = {m}, got shape {W.shape}")
    as_bytes = np.ascontiguousarray(W.astype("<u8", copy=False)).view(np.uint8)
    bits = np.unpackbits(as_bytes, axis=-1, bitorder="little")
    return np.ascontiguousarray(bits[..., :m])
