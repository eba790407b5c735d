"""Result files: provenance and atomic JSON writes (no rendering here)."""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sketchsim.errors import SketchsimError
from sketchsim.machine import machine_facts, portable_argv, portable_value, versions

__all__ = [
    "versions",
    "atomic_path",
    "write_json_atomic",
    "read_json",
    "loads_json",
    "result_payload",
    "finite_json",
    "field_problem",
]


def finite_json(value):
    """``value`` with every non-finite float replaced by ``None`` (JSON has no NaN)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite_json(v) for v in value]
    return value


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextmanager
def atomic_path(path: str | os.PathLike, suffix: str = ".tmp") -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success it replaces ``path`` atomically.

    Write the file at the yielded path inside the ``with`` block.  When the block
    ends normally the file gets the usual ``0666 & ~umask`` mode and is moved onto
    ``path`` with ``os.replace`` (readers see the old file or the new one, never a
    part); when it raises (``KeyboardInterrupt`` included) the temporary file is
    removed and ``path`` is left as it was.  The parent folder is created.

    Parameters
    ----------
    path : path-like
        Final location.
    suffix : str
        Ending of the temporary name (``".npz"`` for writers that append one otherwise).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # the temporary name does not grow with the target's: a name at the file
    # system's limit must still be writable
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=".sketchsim-", suffix=suffix)
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def write_json_atomic(path: str | os.PathLike, payload: dict) -> Path:
    """Write ``payload`` as strict JSON to ``path`` atomically (see :func:`atomic_path`).

    Non-finite floats become ``null``; the file gets the usual ``0666 & ~umask`` mode.
    """
    text = json.dumps(finite_json(payload), indent=2, sort_keys=False, allow_nan=False) + "\n"
    with atomic_path(path) as tmp:
        tmp.write_text(text)
    return Path(path)


def result_payload(command: str, params: dict, result: dict) -> dict:
    """A result file: the measured keys at top level, plus provenance.

    Provenance is the command, its parameters, the versions, the machine (CPU
    model, the kernels torch and numba chose, threads: see
    :mod:`sketchsim.machine`) and the command line without absolute paths.
    """
    return {
        **result,
        "command": command,
        "parameters": portable_value(params),
        "versions": versions(),
        "machine": machine_facts(),
        "argv": portable_argv(),
    }


def _no_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def loads_json(text: str, where: str) -> object:
    """Strict JSON from ``text``; every defect is one :class:`SketchsimError` naming ``where``.

    ``NaN`` and ``Infinity`` are refused (result files never hold them), and so
    is nesting too deep for the parser (a ``RecursionError`` otherwise).
    """
    try:
        return json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise SketchsimError(f"{where}: JSON nested too deeply") from None
    except ValueError as exc:
        raise SketchsimError(f"{where} is not valid JSON ({exc})") from None


def read_json(path: str | os.PathLike) -> object:
    """The parsed content of a JSON file (see :func:`loads_json`).

    Raises
    ------
    SketchsimError
        When the file cannot be read, is not UTF-8 text, or is not strict JSON.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise SketchsimError(f"{path} is not UTF-8 text") from None
    except OSError as exc:
        raise SketchsimError(f"cannot read {path}: {exc.strerror or exc}") from None
    return loads_json(text, str(path))


def field_problem(entry, fields: dict) -> str | None:
    """What is wrong with a resumed JSON object, or None when nothing is.

    Parameters
    ----------
    entry : object
        A value read back from a result file.
    fields : dict
        Required keys and their allowed JSON types (a type or a tuple).  ``int``
        excludes ``bool``, a ``float`` must be finite (JSON files hold no NaN),
        and ``float`` also admits ``int``.

    Returns
    -------
    str or None
        ``"has no 'key'"``, ``"has key = value, of the wrong type"`` or
        ``"is a list, not an object"``.
    """
    if not isinstance(entry, dict):
        return f"is a {type(entry).__name__}, not an object"
    for key, kinds in fields.items():
        if key not in entry:
            return f"has no {key!r}"
        if not _is(entry[key], kinds if isinstance(kinds, tuple) else (kinds,)):
            return f"has {key} = {entry[key]!r:.40}, of the wrong type"
    return None


def _is(value, kinds: tuple) -> bool:
    for kind in kinds:
        if kind is None and value is None:
            return True
        if kind is float and isinstance(value, int | float) and not isinstance(value, bool):
            if math.isfinite(value):
                return True
        elif kind is int and isinstance(value, int) and not isinstance(value, bool):
            return True
        elif kind not in (None, int, float) and isinstance(value, kind):
            return True
    return False
