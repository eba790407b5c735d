"""Cells every table writes the same way."""

from __future__ import annotations

__all__ = ["verdict"]


def verdict(ok: bool, yes: str = "yes", no: str = "no") -> str:
    """A coloured verdict for rich tables."""
    return f"[green]{yes}[/green]" if ok else f"[red]{no}[/red]"
