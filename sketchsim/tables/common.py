"""Cells every table writes the same way."""

from __future__ import annotations

__all__ = ["verdict", "num", "plain"]


def verdict(ok: bool, yes: str = "yes", no: str = "no") -> str:
    """A coloured verdict for rich tables."""
    return f"[green]{yes}[/green]" if ok else f"[red]{no}[/red]"


def num(value, fmt: str = ",.2f") -> str:
    """``value`` formatted with ``fmt``, or ``-`` when there is none."""
    return "-" if value is None else format(value, fmt)


def plain(text) -> str:
    """``text`` (a file name, a spec) shown as it is, on one line: rich markup escaped and
    control characters written as escapes (:func:`sketchsim.errors.printable`)."""
    from rich.markup import escape

    from sketchsim.errors import printable

    return escape(printable(text))
