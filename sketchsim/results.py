"""Result files: provenance and atomic JSON writes (no rendering here)."""

from __future__ import annotations

import json
import math
import os
import platform
import sys
import tempfile
from pathlib import Path

import sketchsim

__all__ = ["versions", "write_json_atomic", "result_payload", "finite_json"]


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


def write_json_atomic(path: str | os.PathLike, payload: dict) -> Path:
    """Write ``payload`` as strict JSON to ``path`` via a temporary file and ``os.replace``.

    Non-finite floats become ``null``; the file gets the usual ``0666 & ~umask`` mode.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(finite_json(payload), fh, indent=2, sort_keys=False, allow_nan=False)
            fh.write("\n")
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def result_payload(command: str, params: dict, result: dict) -> dict:
    """A result file: the measured keys at top level, plus provenance."""
    return {
        **result,
        "command": command,
        "parameters": params,
        "versions": versions(),
        "argv": sys.argv,
    }
