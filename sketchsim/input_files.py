"""Every file a command reads, so that no output is ever written over one.

An argument names files directly (``certify w.npz``), inside a spec
(``trained:weights=w.npz,bits=4``, ``my.py:NAME``, ``mqar:file=f.npz``) or as a
folder whose weights files, families and plug-ins (``*.npz``, ``*.py``) a
command reads (``capacity FOLDER``).  :func:`input_files` collects them all as
real paths; :func:`refuse_overwrite` names the first output that is one of them;
:func:`path_problem` says in words why a path names no file (missing, a symlink loop).
"""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Iterable

from sketchsim.errors import SketchsimError

__all__ = ["input_files", "refuse_overwrite", "path_problem", "file_problem", "FOLDER_SUFFIXES"]

#: Files of a folder argument that count as read (weights, family files, plug-ins).
FOLDER_SUFFIXES = (".npz", ".py")
#: Most entries of one folder argument looked at.
_FOLDER_LIMIT = 100_000


def _is_file(path: str) -> bool:
    try:
        return os.path.isfile(path)
    except (OSError, ValueError):
        return False


def _folder_files(folder: str) -> list[str]:
    out = []
    try:
        with os.scandir(folder) as entries:
            for k, entry in enumerate(entries):
                if k >= _FOLDER_LIMIT:
                    break
                if entry.name.lower().endswith(FOLDER_SUFFIXES) and entry.is_file():
                    out.append(os.path.realpath(entry.path))
    except (OSError, ValueError):
        pass
    return out


def input_files(values) -> set[str]:
    """Real paths of every existing file ``values`` name (a value or a list of them).

    A value is a path (a file, or a folder whose ``*.npz`` and ``*.py`` count),
    or a spec whose ``:``, ``,`` and ``=`` separated pieces may be paths.
    """
    if not isinstance(values, list | tuple | set | frozenset):
        values = [values]
    out: set[str] = set()
    for value in values:
        if isinstance(value, list | tuple):
            out |= input_files(value)
            continue
        if not isinstance(value, str | os.PathLike) or not str(value):
            continue
        text = str(value)
        pieces = [text, *re.split(r"[:,=]", text)]
        for piece in pieces:
            piece = piece.strip()
            if not piece:
                continue
            if _is_file(piece):
                out.add(os.path.realpath(piece))
            elif piece == text and os.path.isdir(piece):
                out.update(_folder_files(piece))
    return out


def refuse_overwrite(outputs: dict[str, str], inputs: Iterable[tuple[str, object]]) -> None:
    """Raise when an output names a file that an input reads.

    Parameters
    ----------
    outputs : dict
        ``{path: how it is named}`` (``"--json"``).
    inputs : iterable of (name, value)
        Each input argument's name (``"--protocol"``, ``"FOLDER"``) and value.

    Raises
    ------
    SketchsimError
        ``--json would overwrite the input ... (--protocol); choose another output path``;
        or an output of a suffix a folder argument reads (:data:`FOLDER_SUFFIXES`) inside
        that folder: the next run over the folder would read it as an input.
    """
    real = {os.path.realpath(str(path)): how for path, how in outputs.items()}
    for name, value in inputs:
        for path in sorted(input_files(value)):
            if path in real:
                raise SketchsimError(
                    f"{real[path]} would overwrite the input {path} ({name}); "
                    "choose another output path"
                )
        folder = _folder(value)
        for path, how in real.items() if folder else ():
            if os.path.dirname(path) == folder and path.lower().endswith(FOLDER_SUFFIXES):
                raise SketchsimError(
                    f"{how} {os.path.basename(path)} would land inside {name} {folder}, where "
                    "a later run reads every such file as an input; choose another output path"
                )


def _folder(value) -> str | None:
    """The real path of ``value`` when it names a folder (a folder argument), else None."""
    if not isinstance(value, str | os.PathLike) or not str(value):
        return None
    try:
        return os.path.realpath(value) if os.path.isdir(value) else None
    except (OSError, ValueError):
        return None


def path_problem(path, missing: str = "no such file") -> str | None:
    """Why ``path`` names nothing that can be opened, in words; ``None`` when it does.

    ``missing`` for a path that does not exist (``""``: a missing path is no problem);
    a symlink loop (``a -> a``), a dangling symlink and a path through a file are said
    as such, not as missing.  A symlink's target is shown through
    :func:`sketchsim.errors.printable`.
    """
    from sketchsim.errors import printable

    try:
        os.stat(path)
    except ValueError:  # an embedded NUL
        return "is not a valid path (it contains a NUL character)"
    except FileNotFoundError:
        try:
            if os.path.islink(path):
                return f"is a symlink to {printable(os.readlink(path))}, which does not exist"
        except (OSError, ValueError):
            pass
        return missing or None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "is a symlink loop, or goes through one: it cannot be resolved"
        if exc.errno == errno.ENOTDIR:
            return "cannot be reached: a folder on its path is a file"
        return f"cannot be read ({exc.strerror or exc})"
    return None


def file_problem(path, missing: str = "no such file") -> str | None:
    """Why ``path`` is not a regular file to read, in words (:func:`path_problem`, or a
    folder, a FIFO, a device); ``None`` when it is one."""
    problem = path_problem(path, missing)
    if problem:
        return problem
    try:
        if not os.path.exists(path):  # missing, and missing="" says that is no problem
            return None
        if os.path.isdir(path):
            return "is a folder, not a file"
        if not os.path.isfile(path):
            return "is not a regular file (a FIFO or a device?)"
    except (OSError, ValueError) as exc:
        return f"cannot be read ({getattr(exc, 'strerror', None) or exc})"
    return None
