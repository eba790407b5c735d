"""Bit packing, and the bit helpers jitted kernels inline (popcount, byte gather).

Tokens in ``{0,1}^m`` are stored little-endian in ``uint64`` words: element
``k`` of a token is bit ``k % 64`` of word ``k // 64``.  Unused high bits of the
last word are always zero, so popcounts of ANDed words are exact inner products.
"""

from __future__ import annotations

import numpy as np

# the jitted helpers are module attributes built on first access (``__getattr__``)
__all__ = [  # noqa: F822
    "pack_bits",
    "unpack_bits",
    "popcount64",
    "trailing_zeros64",
    "load_u64",
    "gather8",
    "n_words",
    "as_binary",
]

#: Multiplier that gathers the low bits of eight 0/1 bytes into one byte:
#: byte ``i`` of a little-endian word lands on bit ``56 + i`` of the product
#: (partial products sit at distinct bits ``8i + 7j + 7``, so nothing carries).
GATHER_MAGIC = 0x0102040810204080

_JIT_NAMES = ("popcount64", "trailing_zeros64", "load_u64", "gather8")


def __getattr__(name):
    # numba is imported on first use of a jitted helper, not by ``import sketchsim``
    if name in _JIT_NAMES:
        helpers = _jit_helpers()
        globals().update(helpers)
        return helpers[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _jit_helpers() -> dict:
    """Build the helpers jitted kernels call: popcount, lowest set bit, unaligned 8-byte
    load, bit gather."""
    from numba import config as numba_config
    from numba import njit, types
    from numba.extending import intrinsic

    if numba_config.DISABLE_JIT:  # pragma: no cover - exercised by the no-JIT test
        mask = (1 << 64) - 1

        def popcount64(x):
            """Number of set bits of a 64-bit word (Python fallback)."""
            return int(x).bit_count()

        def trailing_zeros64(x):
            """Index of the lowest set bit of a 64-bit word, 64 for 0 (Python fallback)."""
            x = int(x)
            return (x & -x).bit_length() - 1 if x else 64

        def load_u64(flat, offset):
            """Bytes ``flat[offset : offset + 8]`` as a little-endian uint64 (Python fallback)."""
            return np.uint64(int.from_bytes(flat[offset : offset + 8].tobytes(), "little"))

        def gather8(v):
            """Bit ``i`` of the result is byte ``i`` of ``v`` (0/1 bytes; Python fallback)."""
            return np.uint64(((int(v) * GATHER_MAGIC) & mask) >> 56)

        return {
            "popcount64": popcount64,
            "trailing_zeros64": trailing_zeros64,
            "load_u64": load_u64,
            "gather8": gather8,
        }

    from llvmlite import ir

    @intrinsic
    def _ctpop64(typingctx, x):
        """LLVM ``ctpop`` on a uint64, returned as int64 (avoids uint64/int64 -> float64)."""
        if not isinstance(x, types.Integer):
            return None
        sig = types.int64(types.uint64)

        def codegen(context, builder, signature, args):
            return builder.ctpop(args[0])

        return sig, codegen

    @intrinsic
    def _cttz64(typingctx, x):
        """LLVM ``cttz`` on a uint64 (64 for 0), returned as int64."""
        if not isinstance(x, types.Integer):
            return None
        sig = types.int64(types.uint64)

        def codegen(context, builder, signature, args):
            # zero is not poison: cttz(0) = 64 (tzcnt gives it; without BMI, bsf + cmov)
            return builder.cttz(args[0], ir.Constant(ir.IntType(1), 0))

        return sig, codegen

    @intrinsic
    def _load_u64(typingctx, arr, offset):
        """Unaligned little-endian load of 8 bytes of a contiguous uint8 array."""
        if not (isinstance(arr, types.Array) and arr.dtype == types.uint8 and arr.ndim == 1):
            return None
        if not isinstance(offset, types.Integer):
            return None
        sig = types.uint64(arr, types.intp)

        def codegen(context, builder, signature, args):
            data = context.make_array(signature.args[0])(context, builder, value=args[0]).data
            ptr = builder.bitcast(builder.gep(data, [args[1]]), ir.IntType(64).as_pointer())
            return builder.load(ptr, align=1)

        return sig, codegen

    magic = np.uint64(GATHER_MAGIC)
    shift = np.uint64(56)

    @njit(inline="always")
    def popcount64(x):
        """Number of set bits of a 64-bit word, as int64 (LLVM ``ctpop``)."""
        return _ctpop64(np.uint64(x))

    @njit(inline="always")
    def trailing_zeros64(x):
        """Index of the lowest set bit of a 64-bit word, as int64; 64 for 0 (LLVM ``cttz``)."""
        return _cttz64(np.uint64(x))

    @njit(inline="always")
    def load_u64(flat, offset):
        """Bytes ``flat[offset : offset + 8]`` as a little-endian uint64 (no bounds check)."""
        return _load_u64(flat, offset)

    @njit(inline="always")
    def gather8(v):
        """Bit ``i`` of the result is byte ``i`` of ``v`` (bytes must be 0/1)."""
        return (v * magic) >> shift

    return {
        "popcount64": popcount64,
        "trailing_zeros64": trailing_zeros64,
        "load_u64": load_u64,
        "gather8": gather8,
    }


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
