"""Dense ids of distinct 0/1 tokens, in sorted byte order (NumPy only: no torch, no numba).

The certificate numbers the tokens of a family to build its domination graphs,
the training code numbers them for the table feature map; both use
:func:`token_ids`, so a token has the same id everywhere.
"""

from __future__ import annotations

import numpy as np

__all__ = ["PACKED_MAX_M", "TABLE_MAX_M", "packed_keys", "ids_of_keys", "token_ids"]

#: Widest m whose tokens are packed into one integer key (element 0 most significant).
PACKED_MAX_M = 64
#: Widest m whose token ids come from a 2^m lookup table instead of a sort.
TABLE_MAX_M = 24


def packed_keys(tokens: np.ndarray) -> np.ndarray:
    """uint64 keys of 0/1 tokens ``(..., m)``, ``1 <= m <= 64``: key order is byte order.

    Element 0 is the most significant bit of the key.
    """
    m = tokens.shape[-1]
    if not 1 <= m <= PACKED_MAX_M:
        raise ValueError(f"packed keys need 1 <= m <= {PACKED_MAX_M}, got m = {m}")
    packed = np.packbits(tokens, axis=-1, bitorder="big")  # (..., ceil(m/8))
    if packed.shape[-1] < 8:
        pad = np.zeros(packed.shape[:-1] + (8 - packed.shape[-1],), dtype=np.uint8)
        packed = np.concatenate([packed, pad], axis=-1)
    keys = np.ascontiguousarray(packed).view(">u8")[..., 0].astype(np.uint64)
    return keys >> np.uint64(64 - m)


def ids_of_keys(keys: np.ndarray, m: int) -> tuple[np.ndarray, int]:
    """Dense int64 ids of integer keys in increasing key order, and how many distinct keys.

    For ``m <= TABLE_MAX_M`` (and a table not much larger than the keys) the ids
    come from a ``2^m`` presence table and a running sum; otherwise from one sort.
    """
    if keys.size == 0:
        return np.zeros(keys.shape, dtype=np.int64), 0
    if m <= TABLE_MAX_M and (1 << m) <= 8 * keys.size + (1 << 20):
        present = np.zeros(1 << m, dtype=np.int64)
        present[keys.reshape(-1)] = 1
        rank = np.cumsum(present) - 1
        return rank[keys], int(present.sum())
    uniq, ids = np.unique(keys.reshape(-1), return_inverse=True)
    return ids.reshape(keys.shape).astype(np.int64), len(uniq)


def token_ids(tokens: np.ndarray) -> tuple[np.ndarray, int]:
    """Ids ``tokens.shape[:-1]`` of the distinct 0/1 tokens, and how many there are.

    Parameters
    ----------
    tokens : numpy.ndarray, shape (..., m)
        0/1 values (any integer, bool or float dtype).

    Returns
    -------
    ids : numpy.ndarray of int64
        Equal tokens get equal ids; ids follow the tokens' sorted byte order
        (element 0 most significant), so they do not depend on input order.
    count : int
        Number of distinct tokens (0 for no tokens).
    """
    tokens = np.asarray(tokens)
    shape, m = tokens.shape[:-1], tokens.shape[-1]
    flat = np.ascontiguousarray(tokens.reshape(int(np.prod(shape)), m), dtype=np.uint8)
    if flat.shape[0] == 0:
        return np.zeros(shape, dtype=np.int64), 0
    if m == 0:  # every token is the empty token
        return np.zeros(shape, dtype=np.int64), 1
    if m <= PACKED_MAX_M:
        ids, count = ids_of_keys(packed_keys(flat), m)
        return ids.reshape(shape), count
    _, ids = np.unique(flat.view(np.dtype((np.void, m))), return_inverse=True)
    ids = ids.reshape(shape).astype(np.int64)
    return ids, int(ids.max()) + 1
