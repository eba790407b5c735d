"""All terminal rendering: rich consoles, progress bars, verdict colours."""

from __future__ import annotations

import os
from contextlib import contextmanager

from rich.console import Console

console = Console()
if not console.is_terminal and "COLUMNS" not in os.environ:
    console.width = max(console.width, 130)  # logs and pipes get full tables
err_console = Console(stderr=True)


@contextmanager
def progress_bar(description: str, total: int, enabled: bool = True):
    """Yield ``update(done, total)`` driving a rich progress bar on stderr."""
    if not (enabled and err_console.is_terminal):
        yield lambda done, tot: None
        return
    # imported here: runs without a bar (--quiet, pipes) skip rich.progress and rich.live
    from rich.progress import (
        BarColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

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
