"""Length-3 witness families built from codes, and their ``.npz`` files.

For each chosen codeword ``c`` the query is ``x_c`` = complement of ``c``, so
``<x_c, c> = 0`` and ``<x_c, c'> = |c' \\ c|``.  The family holds ``(x_c, u, u)``
for every candidate ``u``, ``(x_c, c, c')`` and (both orders, the default)
``(x_c, c', c)``.  With chains, intermediate tokens
``u_k = (c' & c) | (first s_1 + .. + s_k elements of c' \\ c)`` cross each gap
in the steps of :func:`~sketchsim.certify.chains.best_steps` (THEORY Lemma 3).
"""

from __future__ import annotations

import hashlib
import json
import math
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import sketchsim
from sketchsim.certify.chains import best_steps
from sketchsim.errors import FamilyError, printable
from sketchsim.minip.kernel import minip_targets
from sketchsim.results import atomic_path

__all__ = [
    "WitnessFamily",
    "choose_words",
    "build_witness",
    "save_family",
    "load_family",
    "check_witness_size",
    "check_array_sizes",
]

#: Largest witness family built in memory (inputs).
WITNESS_MAX_INPUTS = 4_000_000

#: Largest array a family file may hold (bytes, as its header declares): a
#: compressed file of a few MB can otherwise expand to more than the machine has.
FAMILY_FILE_MAX_BYTES = 4 << 30


def witness_inputs(codewords: int, m: int, chains: bool) -> int:
    """Upper estimate of a witness family's inputs (both orders; chains of at most m/3 steps)."""
    steps = max(1, m // 3) if chains else 1
    return codewords * (codewords + 2 * (codewords - 1) * steps + (codewords - 1) * (steps - 1))


def check_witness_size(codewords: int, m: int, chains: bool) -> None:
    """Refuse a witness family too large to build, before building it."""
    est = witness_inputs(codewords, m, chains)
    if est > WITNESS_MAX_INPUTS:
        fit = 2
        while witness_inputs(fit + 1, m, chains) <= WITNESS_MAX_INPUTS:
            fit += 1
        raise FamilyError(
            f"a witness family of {codewords:,} codewords (m = {m}) would hold up to "
            f"{est:,} inputs, over the limit {WITNESS_MAX_INPUTS:,} of a family built in "
            f"memory; use at most {fit:,} codewords, or build it packed "
            "(sketchsim witness --packed)"
        )


@dataclass
class WitnessFamily:
    """A length-3 Min-IP family: tokens (F, 3, m), 1-based scored position, targets."""

    tokens: np.ndarray
    position: int
    targets: np.ndarray
    meta: dict

    @property
    def m(self) -> int:
        return int(self.tokens.shape[2])

    def sha256(self) -> str:
        """sha256 (hex) of the tokens as uint8 ``(F, 3, m)`` in C order, then
        ``str(position)``: the inputs and their order (not meta or targets).
        :func:`sketchsim.certify.check.family_sha256` recomputes it from a
        certificate with the standard library."""
        h = hashlib.sha256()
        h.update(np.ascontiguousarray(self.tokens, dtype=np.uint8).tobytes())
        h.update(str(self.position).encode())
        return h.hexdigest()


def choose_words(code: np.ndarray, codewords: int | None, rng) -> np.ndarray:
    """``codewords`` rows of ``code`` drawn with ``rng``, in code order (all when None or more).

    Raises
    ------
    FamilyError
        For fewer than 2 words.
    """
    if codewords is None or codewords >= len(code):
        return code
    if codewords < 2:
        raise FamilyError(f"codewords must be >= 2, got {codewords}", param="codewords")
    return code[np.sort(rng.choice(len(code), size=codewords, replace=False))]


def build_witness(
    code: np.ndarray,
    kind: str = "code",
    codewords: int | None = None,
    chains: bool = False,
    both_orders: bool = True,
    seed: int = 0,
) -> WitnessFamily:
    """Build the witness family of a constant-weight code.

    Parameters
    ----------
    code : numpy.ndarray, shape (K0, m)
    kind : str
        Recorded in the metadata.
    codewords : int, optional
        Use ``codewords`` words chosen with ``seed`` (all when omitted).
    chains : bool
        Add intermediate tokens crossing each gap in optimal steps.
    both_orders : bool
        Add ``(x_c, c', c)`` beside ``(x_c, c, c')``.
    seed : int
        Chooses the codeword subset and the order in which chain tokens gain bits.
    """
    code = np.asarray(code, dtype=np.uint8)
    K0, m = code.shape
    rng = np.random.default_rng(seed)
    chosen = choose_words(code, codewords, rng)
    triples = []
    for c in chosen:
        x = 1 - c
        candidates = [c] + [d for d in chosen if not np.array_equal(d, c)]
        pairs = [(c, d) for d in candidates[1:]]
        if chains:
            extra, chain_pairs = [], []
            for d in candidates[1:]:
                path = _chain(c, d, rng)
                extra += path[1:-1]
                chain_pairs += list(zip(path[:-1], path[1:], strict=True))
            candidates += extra
            pairs = chain_pairs
        triples += [(x, u, u) for u in _unique(candidates)]
        for a, b in pairs:
            triples.append((x, a, b))
            if both_orders:
                triples.append((x, b, a))
    tokens = _dedupe(np.array(triples, dtype=np.uint8))
    meta = {
        "m": int(m),
        "code": kind,
        "codewords": int(len(chosen)),
        "chains": chains,
        "both_orders": both_orders,
        "seed": seed,
        "version": sketchsim.__version__,
    }
    return WitnessFamily(tokens, 1, minip_targets(tokens)[:, 0], meta)


def _chain(c: np.ndarray, d: np.ndarray, rng) -> list[np.ndarray]:
    """Tokens from ``c`` to ``d`` whose overlap with ``1 - c`` grows in optimal steps."""
    outside = np.flatnonzero((d == 1) & (c == 0))
    steps = best_steps(len(outside)) or (len(outside),)
    order = rng.permutation(outside)
    base = (c & d).astype(np.uint8)
    path, taken = [c], 0
    for step in steps[:-1]:
        taken += step
        u = base.copy()
        u[order[:taken]] = 1
        path.append(u)
    path.append(d)
    return path


def _unique(tokens: list[np.ndarray]) -> list[np.ndarray]:
    seen, out = set(), []
    for t in tokens:
        key = t.tobytes()
        if key not in seen:
            seen.add(key)
            out.append(t)
    return out


def _dedupe(tokens: np.ndarray) -> np.ndarray:
    _, idx = np.unique(tokens.reshape(len(tokens), -1), axis=0, return_index=True)
    return tokens[np.sort(idx)]


def save_family(family: WitnessFamily, path: str | Path) -> Path:
    """Write a family to ``path`` (``.npz``), atomically."""
    with atomic_path(path, suffix=".npz") as tmp:
        np.savez_compressed(
            tmp,
            tokens=family.tokens.astype(np.uint8),
            position=np.int64(family.position),
            targets=family.targets.astype(np.int64),
            meta=np.array(json.dumps(family.meta)),
        )
    return Path(path)


def check_array_sizes(path: Path) -> None:
    """Refuse an ``.npz`` whose array headers declare more than :data:`FAMILY_FILE_MAX_BYTES`.

    Reads only the ``.npy`` headers inside the archive, before any array.

    Parameters
    ----------
    path : pathlib.Path
        A family file (token or packed).

    Raises
    ------
    FamilyError
        When an array is too large or the archive cannot be read.
    """
    from numpy.lib import format as npy

    readers = {(1, 0): npy.read_array_header_1_0, (2, 0): npy.read_array_header_2_0}
    try:
        with zipfile.ZipFile(path) as archive:
            for name in archive.namelist():
                if not name.endswith(".npy"):
                    continue
                with archive.open(name) as fh:
                    read = readers.get(npy.read_magic(fh))
                    if read is None:
                        continue  # np.load words what it cannot read
                    shape, _, dtype = read(fh)
                size = math.prod(shape) * dtype.itemsize
                if size > FAMILY_FILE_MAX_BYTES:
                    raise FamilyError(
                        f"{path}: array {name[:-4]} of shape {shape} would take "
                        f"{size / 2**30:,.1f} GiB, over the limit "
                        f"{FAMILY_FILE_MAX_BYTES / 2**30:g} GiB of a family file"
                    )
    except FamilyError:
        raise
    except Exception as exc:  # a damaged archive or header
        raise FamilyError(f"{path} is not a family file: {type(exc).__name__}: {exc}") from None


def load_family(path: str | Path) -> WitnessFamily:
    """Read and validate a family file; any defect is one :class:`FamilyError`."""
    path = Path(path)
    if not path.is_file():  # missing, a symlink loop, a folder: said as such
        from sketchsim.input_files import file_problem

        why = file_problem(path, "does not exist") or "cannot be read"
        raise FamilyError(f"family file {printable(path)} {why}")
    if not zipfile.is_zipfile(path):
        raise FamilyError(f"{path} is not a family file (not an .npz archive)")
    check_array_sizes(path)
    try:
        with np.load(path, allow_pickle=False) as data:
            missing = {"tokens", "position", "targets", "meta"} - set(data.files)
            if "tokens" in missing and "keys" in data.files:
                raise FamilyError(
                    f"{path} is a packed family file (keys, not tokens); read it with "
                    "sketchsim.certify.packed.load_packed_family (sketchsim certify reads both)"
                )
            if missing:
                raise FamilyError(f"{path}: missing arrays {', '.join(sorted(missing))}")
            tokens, targets = data["tokens"], data["targets"]
            position, meta_text = data["position"], str(data["meta"])
    except FamilyError:
        raise
    except FileNotFoundError:  # removed since the check above
        raise FamilyError(f"family file {printable(path)} does not exist") from None
    except Exception as exc:
        raise FamilyError(f"{path} is not a family file: {type(exc).__name__}: {exc}") from None
    if tokens.ndim != 3 or tokens.shape[1] != 3 or tokens.shape[2] < 1:
        raise FamilyError(f"{path}: tokens must have shape (F, 3, m), got {tokens.shape}")
    if not np.issubdtype(tokens.dtype, np.integer) and tokens.dtype != np.bool_:
        raise FamilyError(f"{path}: tokens must be 0/1 integers, got dtype {tokens.dtype}")
    if tokens.size and (tokens.min() < 0 or tokens.max() > 1):
        raise FamilyError(f"{path}: tokens must hold only 0 and 1")
    if len(tokens) == 0:
        raise FamilyError(f"{path}: the family has no inputs")
    if (
        position.shape != ()
        or not np.issubdtype(position.dtype, np.integer)
        or int(position) not in (1, 2, 3)
    ):
        raise FamilyError(
            f"{path}: position must be the integer 1, 2 or 3, got {position!s} "
            f"(dtype {position.dtype})"
        )
    tokens = tokens.astype(np.uint8)
    position = int(position)
    expected = minip_targets(tokens)[:, position - 1] if len(tokens) else np.zeros(0, int)
    if targets.shape != (len(tokens),) or not np.array_equal(targets, expected):
        raise FamilyError(f"{path}: targets do not match min_j <x_p, x_j> at position {position}")
    try:
        meta = json.loads(meta_text)
    except (ValueError, RecursionError):
        raise FamilyError(f"{path}: metadata is not JSON") from None
    if not isinstance(meta, dict):
        raise FamilyError(f"{path}: metadata must be a JSON object, got {type(meta).__name__}")
    return WitnessFamily(tokens, position, targets.astype(np.int64), meta)


def __getattr__(name: str):
    """``Family``, this class's name before #62 (``sketchsim.sketch.family.Family`` is the
    input families' base class): still importable, with a deprecation warning."""
    if name == "Family":
        import warnings

        warnings.warn(
            "sketchsim.certify.witness.Family is now WitnessFamily (Family is the input "
            "families' base class, sketchsim.sketch.family.Family)",
            DeprecationWarning,
            stacklevel=2,
        )
        return WitnessFamily
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
