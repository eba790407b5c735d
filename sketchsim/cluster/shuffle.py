"""Moving ``(fingerprint, input)`` rows to fingerprint ranges with Dask's P2P shuffle.

Every map task of a cluster ``transcript`` run returns one table of rows: the
transcript fingerprint's two 64-bit words, the global input index and (sampled
mode) a 128-bit hash of the input's answers.  Grouping inputs by transcript
needs every row of one fingerprint on one task, so the tables are
range-partitioned by the fingerprint's top 32 bits with
``DataFrame.set_index(..., divisions=..., shuffle_method="p2p")``: Dask's
peer-to-peer shuffle moves the rows between workers (spilling to disk when
memory runs short), with a fixed number of tasks per input and output
partition, instead of one task per (map task, reduce task) pair.  Known
divisions skip the quantile pass, and the output partitions come in
fingerprint order, so their groups, concatenated, are the single process's
groups in its order.

Needs pandas and pyarrow (both in the ``cluster`` extra); imported only by
the cluster path.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "FINGERPRINT_SPAN",
    "row_bytes",
    "frame_of",
    "empty_frame",
    "divisions",
    "range_partitions",
    "arrays_of",
]

#: The shuffle key is the fingerprint's first word shifted down to 32 bits:
#: values ``0 .. FINGERPRINT_SPAN - 1``.
FINGERPRINT_SPAN = 1 << 32

_KEY_SHIFT = np.uint64(32)


def _columns(hashed: bool) -> dict:
    cols = {"key": np.int64, "fp0": np.uint64, "fp1": np.uint64, "idx": np.int64}
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
        "key": (fingerprints[:, 0] >> _KEY_SHIFT).astype(np.int64),
        "fp0": fingerprints[:, 0],
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
    """``partitions + 1`` increasing boundaries splitting the keys into equal ranges."""
    if not 1 <= partitions <= FINGERPRINT_SPAN:
        raise ValueError(f"partitions must be in 1 .. 2^32, got {partitions}")
    return [k * FINGERPRINT_SPAN // partitions for k in range(partitions)] + [FINGERPRINT_SPAN - 1]


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
    """``(fp0, fp1, idx, hashes or None)`` NumPy arrays of a shuffled partition."""
    fp0 = frame["fp0"].to_numpy(dtype=np.uint64)
    fp1 = frame["fp1"].to_numpy(dtype=np.uint64)
    idx = frame["idx"].to_numpy(dtype=np.int64)
    hashes = None
    if "h0" in frame.columns:
        hashes = np.stack(
            [frame["h0"].to_numpy(dtype=np.uint64), frame["h1"].to_numpy(dtype=np.uint64)], axis=1
        )
    return fp0, fp1, idx, hashes
