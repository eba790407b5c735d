"""Result files: provenance and atomic JSON writes (no rendering here)."""

from __future__ import annotations

import json
import math
import os
import platform
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import sketchsim

__all__ = ["versions", "atomic_path", "write_json_atomic", "result_payload", "finite_json"]


def versions() -> dict:
    """Versions of everything that can change a result."""
    from importlib.metadata import PackageNotFoundError, version

    def dist(name: str) -> str | None:
        try:
            return version(name)
        except PackageNotFoundError:
            return None

    return {
        "sketchsim": sketchsim.__version__,
        "python": platform.python_version(),
        "numpy": dist("numpy"),
        "numba": dist("numba"),
    }


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
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=suffix)
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
    """A result file: the measured keys at top level, plus provenance."""
    return {
        **result,
        "command": command,
        "parameters": params,
        "versions": versions(),
        "argv": sys.argv,
    }
