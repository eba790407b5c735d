"""Rendering (rich) and result files (JSON, written atomically)."""

from __future__ import annotations

import json
import os
import platform
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

import sketchsim

console = Console()
if not console.is_terminal and "COLUMNS" not in os.environ:
    console.width = max(console.width, 130)  # logs and pipes get full tables
err_console = Console(stderr=True)


def versions() -> dict:
    """Versions of everything that can change a result."""
    import numba
    import numpy

    return {
        "sketchsim": sketchsim.__version__,
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "numba": numba.__version__,
    }


def write_json_atomic(path: str | os.PathLike, payload: dict) -> Path:
    """Write ``payload`` as JSON to ``path`` via a temporary file and ``os.replace``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(payload, fh, indent=2, sort_keys=False)
            fh.write("\n")
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


@contextmanager
def progress_bar(description: str, total: int, enabled: bool = True):
    """Yield ``update(done, total)`` driving a rich progress bar on stderr."""
    if not (enabled and err_console.is_terminal):
        yield lambda done, tot: None
        return
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.completed:,}/{task.total:,}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=err_console,
        transient=True,
    ) as prog:
        task = prog.add_task(description, total=total)
        yield lambda done, tot: prog.update(task, completed=done, total=tot)


def verdict(ok: bool, yes: str = "yes", no: str = "no") -> str:
    """A coloured verdict for rich tables."""
    return f"[green]{yes}[/green]" if ok else f"[red]{no}[/red]"
