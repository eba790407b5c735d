"""Moving ``(fingerprint, input)`` rows to fingerprint ranges with Dask's P2P shuffle.

Every map task of a cluster ``transcript`` run returns one table of rows: the
transcript fingerprint's two 64-bit words, the global input index and (sampled
mode) a 128-bit hash of the input's answers.  Grouping inputs by transcript
needs every row of one fingerprint on one task, so the tables are
range-partitioned by the fingerprint's first word with
``DataFrame.set_index(key, divisions=..., shuffle_method="p2p")``: Dask's
peer-to-peer shuffle moves the rows between workers (spilling to disk when
memory runs short), with a fixed number of tasks per input and output
partition, instead of one task per (map task, reduce task) pair.  Known
divisions skip the quantile pass, and the output partitions come in
fingerprint order, each sorted by its key, so their groups, concatenated, are
the single process's groups in its order.

The key is the first word with its top bit flipped, read as a signed
integer: an order-preserving map from unsigned to signed 64-bit values (pandas
indexes and Dask divisions are signed), so the key *is* the first word and
travels once.

Needs pandas and pyarrow (both in the ``cluster`` extra); imported only by
the cluster path.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "KEY_MIN",
    "KEY_MAX",
    "key_of",
    "row_bytes",
    "frame_of",
    "empty_frame",
    "divisions",
    "range_partitions",
    "arrays_of",
]

#: Flipping the top bit maps unsigned 64-bit order onto signed order.
_SIGN = np.uint64(1 << 63)
#: The smallest and largest key.
KEY_MIN, KEY_MAX = -(1 << 63), (1 << 63) - 1


def _columns(hashed: bool) -> dict:
    cols = {"key": np.int64, "fp1": np.uint64, "idx": np.int64}
    if hashed:
        cols.update(h0=np.uint64, h1=np.uint64)
    return cols


def row_bytes(hashed: bool) -> int:
    """Bytes one input's row carries through the shuffle (key, fingerprint, index, hash)."""
    return sum(np.dtype(t).itemsize for t in _columns(hashed).values())


def frame_of(fingerprints: np.ndarray, idx: np.ndarray, hashes: np.ndarray | None):
    """The rows of one map task as a pandas ``DataFrame`` (the shuffle's input).

    Parameters
    ----------
    fingerprints : numpy.ndarray, shape (k, 2), uint64
    idx : numpy.ndarray, shape (k,), int64
        Global input indices.
    hashes : numpy.ndarray, shape (k, 2), uint64, or None
        Answer hashes (sampled mode).
    """
    import pandas as pd

    cols = {
        "key": (fingerprints[:, 0] ^ _SIGN).view(np.int64),
        "fp1": fingerprints[:, 1],
        "idx": idx.astype(np.int64, copy=False),
    }
    if hashes is not None:
        cols.update(h0=hashes[:, 0], h1=hashes[:, 1])
    return pd.DataFrame(cols, copy=False)


def empty_frame(hashed: bool):
    """A frame with no rows and the shuffle input's columns (Dask's ``meta``)."""
    import pandas as pd

    return pd.DataFrame({k: pd.Series([], dtype=v) for k, v in _columns(hashed).items()})


def divisions(partitions: int) -> list[int]:
    """``partitions + 1`` increasing keys splitting the key space into equal ranges."""
    if not 1 <= partitions <= 1 << 32:
        raise ValueError(f"partitions must be in 1 .. 2^32, got {partitions}")
    return [KEY_MIN + (k << 64) // partitions for k in range(partitions)] + [KEY_MAX]


def key_of(fp0: np.ndarray) -> np.ndarray:
    """The shuffle key of fingerprint first words (order-preserving, int64)."""
    return (np.asarray(fp0, dtype=np.uint64) ^ _SIGN).view(np.int64)


def range_partitions(frames: list, partitions: int, hashed: bool) -> list:
    """Shuffle the map tables into ``partitions`` fingerprint ranges, lazily.

    Parameters
    ----------
    frames : list of distributed.Future
        One table (:func:`frame_of`) per map task.
    partitions : int
    hashed : bool
        Whether the tables carry answer hashes.

    Returns
    -------
    list of dask.delayed.Delayed
        One per range, in fingerprint order; compute them (or tasks on them)
        with the client.  Rows of one range come in no particular order.
    """
    import dask.dataframe as dd

    df = dd.from_delayed(frames, meta=empty_frame(hashed), verify_meta=False)
    ranged = df.set_index("key", divisions=divisions(partitions), shuffle_method="p2p")
    return list(ranged.to_delayed())


def arrays_of(frame) -> tuple:
    """``(fp0, fp1, idx, hashes or None)`` NumPy arrays of a shuffled partition.

    The partition's index is the key (:func:`range_partitions`), or its
    ``key`` column when it was not shuffled.
    """
    key = frame["key"] if "key" in frame.columns else frame.index
    fp0 = key.to_numpy(dtype=np.int64).view(np.uint64) ^ _SIGN
    fp1 = frame["fp1"].to_numpy(dtype=np.uint64)
    idx = frame["idx"].to_numpy(dtype=np.int64)
    hashes = None
    if "h0" in frame.columns:
        hashes = np.stack(
            [frame["h0"].to_numpy(dtype=np.uint64), frame["h1"].to_numpy(dtype=np.uint64)], axis=1
        )
    return fp0, fp1, idx, hashes
