"""The CLI's rich consoles (results on stdout, notes and progress on stderr) and its
progress bars; the tables each command prints are built in :mod:`sketchsim.tables`."""

from __future__ import annotations

import os
from contextlib import contextmanager

from rich.console import Console

console = Console()
if not console.is_terminal and "COLUMNS" not in os.environ:
    console.width = max(console.width, 130)  # logs and pipes get full tables
err_console = Console(stderr=True)


@contextmanager
def progress_bar(description: str, total: int, enabled: bool = True, plain: bool = False):
    """Yield ``update(done, total)`` driving a rich progress bar on stderr.

    When stderr is not a terminal the bar is skipped; with ``plain`` (long
    cluster runs, whose logs are read later) plain lines are printed instead.
    """
    if enabled and plain and not err_console.is_terminal:
        yield PlainProgress(description)
        return
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


class PlainProgress:
    """Progress as plain lines (``verify (shards): 12/40 (30%), 1.5 min left``).

    A line at most every ``every`` seconds and at the end.  The time left is
    extrapolated from the throughput measured since the first update that showed
    progress, so the estimate starts only once work has finished (no guess from
    a nominal rate); before that the line says "estimating".
    """

    def __init__(self, description: str, every: float = 10.0, clock=None):
        import time

        self.description, self.every = description, every
        self.clock = clock or time.monotonic
        self.first: tuple[float, int] | None = None
        self.last_line = -float("inf")

    def __call__(self, done: int, total: int) -> None:
        now = self.clock()
        if self.first is None and done > 0:
            self.first = (now, done)
        if done < total and now - self.last_line < self.every:
            return
        self.last_line = now
        pct = 100.0 * done / total if total else 100.0
        left = "estimating"
        if self.first is not None and done > self.first[1]:
            rate = (done - self.first[1]) / max(now - self.first[0], 1e-9)
            from sketchsim.estimates import duration_words

            left = duration_words((total - done) / rate) + " left"
        if done >= total:
            left = "done"
        err_console.print(f"{self.description}: {done:,}/{total:,} ({pct:.0f}%), {left}")
