"""Witness families too large for token arrays: packed keys, built and certified in blocks.

The families ``sketchsim bound`` reports at m = 24..32 hold 2 x 10^7 to 9 x 10^7
inputs: 2 to 8 GB as ``(F, 3, m)`` bytes, and several times that in the Python
list :func:`~sketchsim.certify.witness.build_witness` builds, so they are over
:data:`~sketchsim.certify.witness.WITNESS_MAX_INPUTS`.  Here every token is one
integer key (:func:`~sketchsim.minip.token_ids.packed_keys`: element 0 is the
most significant bit, so key order is byte order), 24 bytes an input in memory
and 12 in a file at ``m <= 32``:

- :class:`PackedFamily` holds them; :func:`save_packed_family` /
  :func:`load_packed_family` write and read an ``.npz`` that holds ``keys``
  instead of ``tokens`` (untrusted input: every field checked).
- :mod:`sketchsim.certify.packed_witness` builds the witness family this way and
  :mod:`sketchsim.certify.packed_certify` certifies it block by block.
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sketchsim.certify.witness import WitnessFamily, check_array_sizes, load_family
from sketchsim.errors import FamilyError, printable
from sketchsim.minip.token_ids import PACKED_MAX_M, packed_keys

__all__ = [
    "PACKED_MAX_INPUTS",
    "PackedFamily",
    "pack_family",
    "unpack_keys",
    "save_packed_family",
    "load_packed_family",
    "is_packed_file",
    "load_any_family",
]

#: Largest packed family built or read (inputs): 2.4 GB of uint64 keys in memory.
PACKED_MAX_INPUTS = 10**8
#: Inputs per block while certifying, and per chunk unpacked while hashing.
BLOCK_INPUTS = 1 << 21
#: Largest (queries in a block) x (pairs) lookup table while certifying.
BLOCK_LOOKUPS = 1 << 23


@dataclass
class PackedFamily:
    """A length-3 family as integer keys ``(F, 3)``, one per token, scored at ``position``."""

    keys: np.ndarray
    m: int
    position: int
    meta: dict

    @property
    def inputs(self) -> int:
        """Number of inputs ``F``."""
        return int(len(self.keys))

    def tokens(self, start: int = 0, stop: int | None = None) -> np.ndarray:
        """The 0/1 tokens ``(stop - start, 3, m)`` of inputs ``start:stop``."""
        return unpack_keys(self.keys[start:stop], self.m)

    def targets(self) -> np.ndarray:
        """Min-IP targets ``min_j <x_p, x_j>`` at the scored position (popcounts of keys)."""
        p = self.position - 1
        x = self.keys[:, p]
        return np.min([np.bitwise_count(x & self.keys[:, j]) for j in range(3)], axis=0)

    def unpack(self) -> WitnessFamily:
        """The same family with token arrays (only for families that fit in memory)."""
        tokens = self.tokens()
        targets = self.targets().astype(np.int64)
        return WitnessFamily(tokens, self.position, targets, dict(self.meta))

    def sha256(self) -> str:
        """:meth:`WitnessFamily.sha256` of the unpacked family, computed a block at a time."""
        h = hashlib.sha256()
        for start in range(0, self.inputs, BLOCK_INPUTS):
            h.update(np.ascontiguousarray(self.tokens(start, start + BLOCK_INPUTS)).tobytes())
        h.update(str(self.position).encode())
        return h.hexdigest()


def unpack_keys(keys: np.ndarray, m: int) -> np.ndarray:
    """0/1 tokens of integer keys, the inverse of ``packed_keys``.

    Parameters
    ----------
    keys : numpy.ndarray of unsigned integers
        Keys below ``2^m``; element 0 is the most significant bit.
    m : int
        Token width, ``1 <= m <= 64``.

    Returns
    -------
    numpy.ndarray of uint8, shape ``keys.shape + (m,)``
    """
    keys = np.ascontiguousarray(keys, dtype=">u8")  # big-endian: bytes in bit order
    bits = np.unpackbits(keys.view(np.uint8).reshape(*keys.shape, 8), axis=-1)
    return np.ascontiguousarray(bits[..., 64 - m :])


def pack_family(family: WitnessFamily) -> PackedFamily:
    """The packed form of a family.

    Parameters
    ----------
    family : WitnessFamily
        A length-3 family with ``m <= 64``.

    Returns
    -------
    PackedFamily
        The same inputs in the same order; ``unpack()`` gives the family back.
    """
    if not 1 <= family.m <= PACKED_MAX_M:
        raise FamilyError(f"packed families need 1 <= m <= {PACKED_MAX_M}, got m = {family.m}")
    keys = packed_keys(np.ascontiguousarray(family.tokens, dtype=np.uint8))
    return PackedFamily(keys, family.m, family.position, dict(family.meta))


# ----------------------------------------------------------------------------- building


def save_packed_family(family: PackedFamily, path: str | Path) -> Path:
    """Write a packed family to ``path``, atomically.

    The ``.npz`` holds ``keys`` (uint32 when ``m <= 32``, else uint64), ``m``,
    ``position``, ``targets`` (uint8) and ``meta`` (JSON).

    Parameters
    ----------
    family : PackedFamily
    path : path-like

    Returns
    -------
    pathlib.Path
    """
    from sketchsim.results import atomic_path

    arrays = {
        "keys": family.keys.astype(np.uint32 if family.m <= 32 else np.uint64),
        "m": np.int64(family.m),
        "position": np.int64(family.position),
        "targets": family.targets().astype(np.uint8),
        "meta": np.array(json.dumps(family.meta)),
    }
    with atomic_path(path, suffix=".npz") as tmp:
        # np.savez_compressed's archive at deflate level 1: 3-4x faster on 10^8 keys
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
            for name, value in arrays.items():
                with archive.open(f"{name}.npy", "w", force_zip64=True) as fh:
                    np.lib.format.write_array(fh, value, allow_pickle=False)
    return Path(path)


def is_packed_file(path: str | Path) -> bool:
    """Whether ``path`` is an ``.npz`` holding packed ``keys`` (not ``tokens``)."""
    try:
        with zipfile.ZipFile(path) as archive:
            names = set(archive.namelist())
    except (OSError, zipfile.BadZipFile):
        return False
    return "keys.npy" in names and "tokens.npy" not in names


def _scalar_int(value, what: str, path: Path) -> int:
    if value.shape != () or not np.issubdtype(value.dtype, np.integer):
        raise FamilyError(f"{path}: {what} must be an integer, got {value!s} (dtype {value.dtype})")
    return int(value)


def load_packed_family(path: str | Path) -> PackedFamily:
    """Read and validate a packed family file.

    Parameters
    ----------
    path : path-like

    Returns
    -------
    PackedFamily

    Raises
    ------
    FamilyError
        For any defect (one line): sizes, dtypes, keys beyond ``m`` bits,
        targets that are not the Min-IP targets, metadata.
    """
    path = Path(path)
    if not path.is_file():
        from sketchsim.input_files import file_problem

        why = file_problem(path, "does not exist") or "cannot be read"
        raise FamilyError(f"family file {printable(path)} {why}")
    check_array_sizes(path)
    try:
        with np.load(path, allow_pickle=False) as data:
            missing = {"keys", "m", "position", "targets", "meta"} - set(data.files)
            if missing:
                raise FamilyError(f"{path}: missing arrays {', '.join(sorted(missing))}")
            keys, m, position = data["keys"], data["m"], data["position"]
            targets, meta_text = data["targets"], str(data["meta"])
    except FamilyError:
        raise
    except Exception as exc:
        raise FamilyError(f"{path} is not a family file: {type(exc).__name__}: {exc}") from None
    m = _scalar_int(m, "m", path)
    position = _scalar_int(position, "position", path)
    if not 1 <= m <= PACKED_MAX_M or position not in (1, 2, 3):
        raise FamilyError(f"{path}: need 1 <= m <= {PACKED_MAX_M} and position 1-3")
    if keys.ndim != 2 or keys.shape[1] != 3 or keys.dtype.kind != "u" or len(keys) == 0:
        raise FamilyError(f"{path}: keys must be unsigned integers of shape (F >= 1, 3)")
    if len(keys) > PACKED_MAX_INPUTS:
        raise FamilyError(f"{path}: {len(keys):,} inputs, over the limit {PACKED_MAX_INPUTS:,}")
    keys = keys.astype(np.uint64)
    if m < 64 and int(keys.max()) >> m:
        raise FamilyError(f"{path}: a key has bits beyond the m = {m} elements")
    try:
        meta = json.loads(meta_text)
    except (ValueError, RecursionError):
        raise FamilyError(f"{path}: metadata is not JSON") from None
    if not isinstance(meta, dict):
        raise FamilyError(f"{path}: metadata must be a JSON object, got {type(meta).__name__}")
    family = PackedFamily(keys, m, position, meta)
    if targets.shape != (len(keys),) or not np.array_equal(targets, family.targets()):
        raise FamilyError(f"{path}: targets do not match min_j <x_p, x_j> at position {position}")
    return family


def load_any_family(path: str | Path) -> WitnessFamily | PackedFamily:
    """A family file of either kind: :class:`PackedFamily` for packed keys, else
    :class:`WitnessFamily`."""
    return load_packed_family(path) if is_packed_file(path) else load_family(path)


# ----------------------------------------------------------------------------- certificate
